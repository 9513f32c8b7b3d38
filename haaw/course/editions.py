"""The student edition of the notebooks, written from the instructor edition the repository holds.

    python -m haaw.course.editions student OUT_DIR [--notebooks DIR]

A student edition is the same notebooks with these differences: ``solution(...)`` is switched off (the
first code cell sets HAAW_SOLUTIONS=off; ``hint(...)`` still works, tier by tier) and the text no longer
points at it; every exercise cell's stored output is cleared, so nothing is shown before the learner
runs it; and so is every later cell's output that would give away a number an exercise asks for, or, in the same
section, the words of a word answer (a choice, or what a bug does). On a shared
JupyterHub, also set HAAW_SOLUTIONS=off in the hub's environment. Neither is a lock: a learner can set the
variable back in a cell, and the course's code is installed with it (the instructor guide says so).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SWITCH = 'import os\nos.environ["HAAW_SOLUTIONS"] = "off"  # student edition: solution(...) is switched off\n'
EXERCISE = re.compile(r"\bcheck\(\s*[\"']")
KEY = re.compile(r"""\bcheck\(\s*["']([^"']+)""")


# "`hint("k")` nudges, `solution("k")` shows one way to write it." → "`hint("k")` nudges.": solution() is off
POINTER = re.compile(r"""(`hint\("[^"]+"\)`\s*)(gives a nudge \(ask again for more\)|nudges),\s*`solution\("[^"]+"\)`"""
                     r"""\s*(?:the worked answer|shows one way to write it)\.""")
NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def _reveals(text: str, answer: float) -> bool:
    """Does a number in ``text`` give ``answer`` away: equal to it at the digits the number shows?"""
    if not answer:
        return False
    from .exercises.core import significant_digits  # how many digits a number shows, as the checker counts them

    for token in NUMBER.findall(text):
        digits = max(significant_digits(token), 1)
        try:
            value = float(token.replace(",", ""))
        except ValueError:
            continue
        if float(f"{value:.{digits - 1}e}") == float(f"{answer:.{digits - 1}e}") and (digits >= 2 or abs(answer) >= 10):
            return True
    return False


def _numeric_answer(key: str):
    from .exercises import REGISTRY
    from .exercises.core import NumberExercise

    ex = REGISTRY.get(key)
    if not isinstance(ex, NumberExercise) or not isinstance(ex.answer, (int, float)):
        return None
    return float(ex.answer)


def _word_answers(key: str) -> tuple:
    """The words of a word answer (a choice, or what a bug does) in every spelling the checker accepts, lower case."""
    from .exercises import REGISTRY
    from .exercises.core import BugExercise, ChoiceExercise

    ex = REGISTRY.get(key)
    if isinstance(ex, BugExercise):
        return tuple(w.lower() for w in (ex.explanation, *ex.explanations[ex.explanation]))
    if isinstance(ex, ChoiceExercise):
        return tuple(w.lower() for w in (ex.answer if isinstance(ex.answer, tuple) else (ex.answer,)))
    return ()


def _says(text: str, words: tuple) -> bool:
    """Does ``text`` hold one of ``words`` as a whole phrase (any case)?"""
    low = text.lower()
    return any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", low) for w in words)


def _output_text(cell) -> str:
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def student_notebook(nb):
    """A student copy of the notebook object ``nb`` (nbformat), changed in place and returned."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = POINTER.sub(r"\1\2.", cell.source)
    asked, said = [], []  # the numeric and the word answers of the exercises met so far
    for cell in nb.cells:
        if cell.cell_type == "markdown" and re.match(r"## ", cell.source):
            said = []  # a word ("backward") recurs everywhere: it gives an answer away within its own section only
        if cell.cell_type != "code":
            continue
        shown = _output_text(cell)
        if any(_reveals(shown, answer) for answer in asked) or any(_says(shown, words) for words in said):
            cell.outputs, cell.execution_count = [], None  # run it to see: after you have answered
        asked += [a for a in map(_numeric_answer, KEY.findall(cell.source)) if a is not None]
        said += [w for w in map(_word_answers, KEY.findall(cell.source)) if w]
    code = [c for c in nb.cells if c.cell_type == "code"]
    if code and SWITCH not in code[0].source:
        first = code[0].source
        magic, _, rest = first.partition("\n") if first.startswith("%") else ("", "", first)
        code[0].source = (magic + "\n" if magic else "") + SWITCH + rest
    for cell in code:
        if EXERCISE.search(cell.source):
            cell.outputs, cell.execution_count = [], None
    return nb


def course_notebooks(folder: Path, *, cores: bool = True, companions: bool = True) -> list[Path]:
    """The course's notebooks in ``folder``, in course order: the setup check and the cores (``NN_name.ipynb``),
    then the companions that go deeper (``deeper/NN_name_deeper.ipynb``), in their cores' order."""
    found = sorted(folder.glob("[0-9][0-9]_*.ipynb")) if cores else []
    return found + (sorted(folder.glob("deeper/[0-9][0-9]_*_deeper.ipynb")) if companions else [])


def write_student_edition(out: Path, source: Path) -> list[Path]:
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in course_notebooks(source):
        nb = student_notebook(nbformat.read(path, as_version=4))
        target = out / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
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
