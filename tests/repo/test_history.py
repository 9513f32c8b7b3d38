"""The history explains itself (CONTRIBUTING.md, "Commits"): every commit since the conventions were written has
a subject of at most 72 characters and a body. Older commits are left as they are."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SINCE = "b94dad1"  # the last commit before the conventions


def commits() -> list[tuple[str, str, str]]:
    try:
        log = subprocess.run(["git", "log", "--no-merges", "--format=%h%x1f%s%x1f%b%x1e", f"{SINCE}..HEAD"],
                             cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pytest.skip("git is not available")
    if log.returncode != 0:
        pytest.skip(f"no history to read here (a shallow clone or an export): {log.stderr.strip()[:200]}")
    return [tuple(entry.strip("\n").split("\x1f")) for entry in log.stdout.split("\x1e") if entry.strip()]


def problems(entries) -> list[str]:
    found = []
    for sha, subject, body in entries:
        if len(subject) > 72:
            found.append(f"{sha}: the subject has {len(subject)} characters, over 72: {subject[:80]}")
        if not body.strip():
            found.append(f"{sha}: no body saying why: {subject}")
    return found


def test_every_commit_since_the_conventions_has_a_short_subject_and_a_body():
    assert problems(commits()) == []


def test_a_long_subject_and_a_missing_body_are_named():
    assert problems([("abc1234", "x" * 73, "Why."), ("def5678", "Short", "\n")]) == [
        "abc1234: the subject has 73 characters, over 72: " + "x" * 73, "def5678: no body saying why: Short"]


def test_the_commit_msg_hook_refuses_what_the_history_test_refuses(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("hook", ROOT / "scripts" / "check_commit_message.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert hook.problems("Short subject\n\nWhy it changed.\n# a comment git adds\n") == []
    assert hook.problems("x" * 73 + "\n\nWhy.") == ["the subject has 73 characters, over 72: " + "x" * 73]
    assert hook.problems("Short subject\n") == ["no body: after the subject, a blank line, then a few lines that say why"]
    assert hook.problems("Merge branch 'topic'\n") == []
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("Short subject\nno blank line\n")
    assert hook.main(["hook", str(message)]) == 1
