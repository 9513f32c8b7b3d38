#!/usr/bin/env python3
"""A git commit-msg hook for CONTRIBUTING.md's rules: a subject of at most 72 characters, a blank line, a body.

    ln -s ../../scripts/check_commit_message.py .git/hooks/commit-msg   # once, in your clone

git passes the message file; a message that breaks a rule is refused with what to change (git keeps it in
.git/COMMIT_EDITMSG, so `git commit -e -F .git/COMMIT_EDITMSG` picks it up again). tests/repo/test_history.py
applies the same rules to the history since they began.
"""
from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 72


def problems(message: str) -> list[str]:
    lines = [line for line in message.splitlines() if not line.startswith("#")]  # git's own comment lines
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines or not lines[0].strip():
        return ["the message is empty"]
    found = []
    if len(lines[0]) > LIMIT:
        found.append(f"the subject has {len(lines[0])} characters, over {LIMIT}: {lines[0][:80]}")
    if lines[0].startswith("Merge "):
        return found  # a merge's subject is git's own
    if len(lines) < 3 or lines[1].strip() or not any(line.strip() for line in lines[2:]):
        found.append("no body: after the subject, a blank line, then a few lines that say why")
    return found


def main(argv: list[str]) -> int:
    found = problems(Path(argv[1]).read_text())
    for problem in found:
        print(f"commit-msg: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
