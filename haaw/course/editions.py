"""The student edition of the notebooks, written from the instructor edition the repository holds.

    python -m haaw.course.editions student OUT_DIR [--notebooks DIR]

A student edition is the same notebooks with two differences: ``solution(...)`` is switched off (the
first code cell sets HAAW_SOLUTIONS=off; ``hint(...)`` still works, tier by tier), and every
exercise cell's stored output is cleared, so nothing is shown before the learner runs it. For graded
use on a shared JupyterHub, also set HAAW_SOLUTIONS=off in the hub's environment: a learner can edit
a notebook's first cell, not the server's environment.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SWITCH = 'import os\nos.environ["HAAW_SOLUTIONS"] = "off"  # student edition: solution(...) is switched off\n'
EXERCISE = re.compile(r"\bcheck\(\s*[\"']")


def student_notebook(nb):
    """A student copy of the notebook object ``nb`` (nbformat), changed in place and returned."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and SWITCH not in code[0].source:
        first = code[0].source
        magic, _, rest = first.partition("\n") if first.startswith("%") else ("", "", first)
        code[0].source = (magic + "\n" if magic else "") + SWITCH + rest
    for cell in code:
        if EXERCISE.search(cell.source):
            cell.outputs, cell.execution_count = [], None
    return nb


def write_student_edition(out: Path, source: Path) -> list[Path]:
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(source.glob("[0-9][0-9]_*.ipynb")):
        nb = student_notebook(nbformat.read(path, as_version=4))
        nbformat.write(nb, out / path.name)
        written.append(out / path.name)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the student edition of the course's notebooks.")
    parser.add_argument("edition", choices=["student"])
    parser.add_argument("out", type=Path, help="folder to write the notebooks into")
    parser.add_argument("--notebooks", type=Path, default=Path(__file__).resolve().parents[2] / "notebooks",
                        help="the instructor edition (default: the repository's notebooks/)")
    args = parser.parse_args(argv)
    if args.out.resolve() == args.notebooks.resolve():
        parser.error("write the student edition to another folder: the repository keeps the instructor edition")
    written = write_student_edition(args.out, args.notebooks)
    print(f"wrote {len(written)} student notebooks to {args.out} (solutions off, exercise outputs cleared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
