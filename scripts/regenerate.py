"""Rewrite, or check, every file the repository derives from its own sources.

    python scripts/regenerate.py          # rewrite what is stale, and say which
    python scripts/regenerate.py --check  # write nothing; exit 1 naming each stale file (CI and tests/repo run this)

What is derived, and from what:
- docs/answer-key.md: every exercise's question and answer, from haaw/course/exercises;
- docs/sections.md and the generated part of docs/instructor-guide.md: the notebooks' sections, goals and
  exercises counted from the notebooks as they are, with the run times stored in docs/notebook-measurements.json.

Run times are measured, not derived: `python scripts/measure_notebooks.py` measures them again (a minute or
two) and rewrites the same files. The suite's times (docs/results/suite.md) are `scripts/suite_times.py`'s.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _measure_notebooks():
    spec = importlib.util.spec_from_file_location("measure_notebooks", ROOT / "scripts" / "measure_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def derived() -> dict[Path, str]:
    """{file: the text it should hold}."""
    from haaw.course.answer_key import render
    from haaw.course.editions import course_notebooks

    measure = _measure_notebooks()
    notebooks = course_notebooks(ROOT / "notebooks")
    files = measure.generated_files(notebooks, measure.stored_measurements(notebooks))
    files[ROOT / "docs" / "answer-key.md"] = render()
    return files


def stale() -> list[Path]:
    return [path for path, text in derived().items() if not path.exists() or path.read_text() != text]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a derived file is stale")
    args = parser.parse_args(argv)
    files = derived()
    behind = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
    for path in behind:
        name = path.relative_to(ROOT)
        if args.check:
            print(f"stale: {name} (run: python scripts/regenerate.py)")
        else:
            path.write_text(files[path])
            print(f"rewrote {name}")
    if not behind:
        print("every derived file is up to date")
    return 1 if args.check and behind else 0


if __name__ == "__main__":
    raise SystemExit(main())
