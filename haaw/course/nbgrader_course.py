"""The course as an nbgrader course, for an instructor who grades with nbgrader (https://nbgrader.readthedocs.io).

    python -m haaw.course.nbgrader_course OUT [--companions] [--only 01 03]

writes OUT/nbgrader_config.py and one assignment per notebook, OUT/source/<notebook>/<notebook>.ipynb: the cores
(with --companions, the companions too; --only picks notebooks by number). In each, an exercise's cell becomes two:

- a solution cell: the learner's stub as the course gives it (``my_dL_dw = ...``, or a function whose body is
  ``...``), then the course's own answer, the one its checker accepts, in an nbgrader solution region
  (``### BEGIN SOLUTION`` ... ``### END SOLUTION``); ``nbgrader generate_assignment`` replaces the region with a
  one-line comment, so a learner sees the stub and nothing more;
- an autograded test cell, locked: the exercise's own ``check``, its message printed (the learner's feedback) and
  asserted correct. Its points are the exercise's minutes in the course's time model (scripts/measure_notebooks.py:
  4 for an answer typed as a number, an array or words, the declared 4 to 30 for code), so a grade is the share of
  the exercises' working time done right.

Every other cell is read-only, so autograding runs the course's own text and code around the learner's answers.
Every output is cleared, and so is the widgets' saved state. The first code cell switches ``solution(...)`` off and the text no longer points at it, as in the student edition
(editions.py). What this does not stop is written in docs/instructor-guide.md ("Grading with nbgrader").
"""
from __future__ import annotations

import argparse
import re
import sys
import textwrap
from pathlib import Path

POINTS_PER_ANSWER = 4  # scripts/measure_notebooks.py's MINUTES_PER_ANSWER (tests/course/test_nbgrader.py keeps them equal)
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = "# (your answer goes above, in place of each ...)"  # what generate_assignment leaves of a solution region
CHECK_LINE = re.compile(r"""^check\(\s*["']([^"']+)["']\s*,\s*(.+?)\s*\)\s*$""")

CONFIG = f'''"""nbgrader's settings for the haaw course (written by python -m haaw.course.nbgrader_course).

Run nbgrader from this folder: nbgrader generate_assignment 01_chain_rule, then collect the learners' notebooks in
submitted/<learner>/<assignment>/ and run nbgrader autograde <assignment>, nbgrader generate_feedback <assignment>.
"""
import os

c = get_config()  # noqa: F821 (nbgrader defines it)
c.CourseDirectory.course_id = "haaw"
# what generate_assignment leaves of a solution region: the stub above it is the course's own
c.ClearSolutions.code_stub = {{"python": {STUB!r}}}
# a notebook whose code exercises all fail still runs to the end; a cell over 120 s is stopped
c.Execute.timeout = 120
# the checks keep no progress file while grading (haaw.course.exercises.progress), and solutions stay off
os.environ["HAAW_PROGRESS"] = "off"
os.environ["HAAW_SOLUTIONS"] = "off"
'''


def points(ex) -> int:
    """An exercise's points: its minutes in the course's time model."""
    return int(getattr(ex, "minutes", POINTS_PER_ANSWER))


def grade_id(key: str) -> str:
    """An exercise's key as an nbgrader cell id (letters, digits, - and _): "01-dL/dw" -> "01-dL_dw"."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", key)


def answer_code(ex, name: str) -> str:
    """The course's own answer to ``ex``, as the code that gives it to ``name``."""
    from .exercises import ArrayExercise, BugExercise, ChoiceExercise, CodeExercise, NumberExercise

    if isinstance(ex, CodeExercise):
        solution = textwrap.dedent(ex.solution).strip("\n")
        defined = re.findall(r"^(?:def|class)\s+(\w+)", solution, flags=re.MULTILINE)
        return solution if name in defined else f"{solution}\n{name} = {defined[0]}"
    if isinstance(ex, NumberExercise):
        value = float(ex.answer)
        return f"{name} = {int(value) if value.is_integer() else value!r}"
    if isinstance(ex, ArrayExercise):
        import numpy as np

        return f"{name} = {np.asarray(ex.answer, dtype=float).tolist()!r}"
    if isinstance(ex, ChoiceExercise):
        return f"{name} = {(ex.answer if isinstance(ex.answer, tuple) else (ex.answer,))[0]!r}"
    if isinstance(ex, BugExercise):
        return f"{name} = {ex.answer!r}"
    raise TypeError(f"{ex.key}: no answer code for a {type(ex).__name__}")


def _meta(grade_id: str, *, solution=False, grade=False, points=0) -> dict:
    """nbgrader's cell metadata (schema 3): a solution cell is the learner's; every other cell is locked."""
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def exercise_cells(source: str, stem: str):
    """(solution cell source, test cell source, key) for an exercise cell, whose last line is its ``check``; or None
    for any other cell."""
    from .exercises import REGISTRY

    lines = source.rstrip().splitlines()
    match = CHECK_LINE.match(lines[-1]) if lines else None
    if not match or match.group(1) not in REGISTRY:
        return None
    key, name = match.groups()
    body = lines[:-1]
    if name == "...":  # check("08-bug-a", ...): the answer typed into the call gets a name of its own
        name = "my_answer"
        body += [f"{name} = ..."]
    if not name.isidentifier():
        raise ValueError(f"{stem}: check({key!r}, {name}) must name the learner's answer")
    while body and not body[-1].strip():
        body.pop()
    ex = REGISTRY[key]
    solution = "\n".join([*body, "", BEGIN, answer_code(ex, name), END])
    test = ("from haaw.course.exercises import check  # the course's own, whatever an answer cell called check\n"
            f'verdict = check("{key}", {name})\n'
            "print(verdict)  # what the checker says: the learner's feedback\n"
            f'assert verdict.correct, "{key} is not solved yet (the message above says why)"')
    return solution, test, key


def nbgrader_notebook(nb, stem: str):
    """The nbgrader source version of the course notebook ``nb`` (nbformat), built in place and returned."""
    import nbformat

    from .editions import POINTER, SWITCH

    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if cell.cell_type == "markdown":
            cell.source = POINTER.sub(r"\1\2.", cell.source)
        split = exercise_cells(cell.source, stem) if cell.cell_type == "code" else None
        if split is None:
            cell.metadata["nbgrader"] = _meta(f"{stem}-cell-{i}")
            cells.append(cell)
            continue
        solution, test, key = split
        from .exercises import REGISTRY

        answer = nbformat.v4.new_code_cell(solution, metadata={"nbgrader": _meta(f"{grade_id(key)}-answer", solution=True)})
        check = nbformat.v4.new_code_cell(test, metadata={"nbgrader": _meta(grade_id(key), grade=True,
                                                                            points=points(REGISTRY[key]))})
        cells += [answer, check]
    code = [c for c in cells if c.cell_type == "code"]
    first = code[0].source
    magic, _, rest = first.partition("\n") if first.startswith("%") else ("", "", first)
    code[0].source = (magic + "\n" if magic else "") + SWITCH + rest
    nb.cells = cells
    nb.metadata.pop("widgets", None)  # the sliders' saved state holds their figures' outputs: answers among them
    return nb


def write_course(out: Path, source: Path, *, companions: bool = False, only: tuple = ()) -> list[Path]:
    """Write the nbgrader course into ``out`` from the course notebooks in ``source``; the notebooks written."""
    import nbformat

    from .editions import course_notebooks

    written = []
    for path in course_notebooks(source, companions=companions):
        if path.stem.startswith("00_") or (only and path.name[:2] not in only):
            continue  # the setup check has no exercise to grade
        nb = nbgrader_notebook(nbformat.read(path, as_version=4), path.stem)
        target = out / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        written.append(target)
    (out / "nbgrader_config.py").write_text(CONFIG)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write the course as an nbgrader course.")
    parser.add_argument("out", type=Path, help="the course folder to write (nbgrader's root)")
    parser.add_argument("--companions", action="store_true", help="the companions too, one assignment each")
    parser.add_argument("--only", nargs="+", default=(), metavar="NN", help="only these notebooks, by number: 01 03")
    parser.add_argument("--notebooks", type=Path, default=Path(__file__).resolve().parents[2] / "notebooks",
                        help="the course's notebooks (default: the repository's notebooks/)")
    args = parser.parse_args(argv)
    written = write_course(args.out, args.notebooks, companions=args.companions, only=tuple(args.only))
    import nbformat

    graded = [c.metadata["nbgrader"] for p in written for c in nbformat.read(p, as_version=4).cells
              if c.metadata["nbgrader"]["grade"]]
    print(f"wrote {len(written)} assignment{'s' * (len(written) != 1)}, {len(graded)} graded exercises worth "
          f"{sum(g['points'] for g in graded)} points, to {args.out}/source; "
          f"then, in {args.out}: nbgrader generate_assignment <name>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
