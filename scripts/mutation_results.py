"""Write docs/results/mutation.md from mutmut's results (run `mutmut run` first; docs/mutation-survivors.md).

    python scripts/mutation_results.py "mutmut run --max-children 2" "24 min 52 s"

The arguments say what was run and how long it took; the counts and the survivors come from `mutmut results
--all true` as mutmut stores them under mutants/.
"""
from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(command: str, took: str) -> None:
    listed = subprocess.run(["mutmut", "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout
    rows = [line.strip().rsplit(": ", 1) for line in listed.splitlines() if ": " in line]
    by_file = collections.defaultdict(collections.Counter)
    for name, status in rows:
        module = re.sub(r"\.x[ǁ_].*$", "", name)
        by_file[module][status] += 1
    total = collections.Counter(status for _, status in rows)
    lines = ["# Mutation testing: the last run's counts", "",
             f"Written by `python scripts/mutation_results.py` after `{command}` ({took}, on the 2-core machine the",
             "course is developed on), from mutmut's own results (`mutmut results`; `mutmut show NAME` shows a mutant).",
             "", f"{len(rows)} mutants: " + ", ".join(f"{n} {s}" for s, n in total.most_common()) + ".", "",
             "| module | " + " | ".join(s for s, _ in total.most_common()) + " |",
             "|---|" + "---|" * len(total)]
    for module in sorted(by_file):
        lines.append(f"| `{module}` | " + " | ".join(str(by_file[module][s]) for s, _ in total.most_common()) + " |")
    lines += ["", "## The survivors", "", "Each name is a function and the mutant's number in it: `mutmut show NAME` shows its change.", ""]
    for name, status in rows:
        if status in ("survived", "no tests"):
            lines.append(f"- `{name}`" + (" (no test reaches it)" if status == "no tests" else ""))
    (ROOT / "docs" / "results" / "mutation.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
