"""Each notebook 01-10 is a core: what a learner needs on a first pass, done in under an hour, with what an expert
wants beyond it in a companion, notebooks/deeper/NN_name_deeper.ipynb. These tests hold the cores to their limits.

Words are counted as docs/sections.md counts them (a formula between $ signs is one word); minutes come from the
time model in scripts/measure_notebooks.py, whose rates are written there.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from haaw.course.editions import course_notebooks
from haaw.course.exercises import REGISTRY
from haaw.course.exercises.code import CodeExercise

nbformat = pytest.importorskip("nbformat")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
CORES = [p for p in course_notebooks(NOTEBOOKS, companions=False) if not p.name.startswith("00")]


MAX_WORDS, MAX_CELL_WORDS, MAX_CODE_LINES = 2000, 200, 25
EXERCISES = range(2, 5)
CHECK = re.compile(r"check\(\s*[\"']([^\"']+)")
PLUG = re.compile(r"\b(?:yours|mine|use|pick)\(([^)]*)\)")  # the ways a learner's function goes into the engine


def _model():
    spec = importlib.util.spec_from_file_location("measure_notebooks", ROOT / "scripts" / "measure_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def words(text: str) -> int:
    return len(re.findall(r"[\w′'’-]+", re.sub(r"\$[^$]*\$", " formula ", text)))


def companion(core: Path) -> Path:
    return core.parent / "deeper" / f"{core.stem}_deeper.ipynb"


def problems(path: Path) -> list[str]:
    """Every way the core at ``path`` breaks its limits, said so that its author knows where to look."""
    nb = nbformat.read(path, as_version=4)
    found = []
    prose = [(i, words(c.source)) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
    if sum(n for _, n in prose) > MAX_WORDS:
        found.append(f"{sum(n for _, n in prose)} words of prose, more than {MAX_WORDS}")
    found += [f"cell {i}: {n} words, more than {MAX_CELL_WORDS} in one markdown cell" for i, n in prose
              if n > MAX_CELL_WORDS]
    found += [f"cell {i}: {len(c.source.splitlines())} lines, more than {MAX_CODE_LINES} in one code cell"
              for i, c in enumerate(nb.cells) if c.cell_type == "code" and len(c.source.splitlines()) > MAX_CODE_LINES]
    asked = {}  # key -> the cell that checks it first
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            for key in CHECK.findall(cell.source):
                asked.setdefault(key, i)
    if len(asked) not in EXERCISES:
        found.append(f"{len(asked)} exercises ({', '.join(asked)}), not {EXERCISES.start} to {EXERCISES.stop - 1}")
    code = {k: i for k, i in asked.items() if isinstance(REGISTRY.get(k), CodeExercise)}
    if not any(_runs_later(nb, i) for i in code.values()):
        found.append("no code exercise whose function a later cell runs inside the engine (yours(...), pick(...))")
    for key, i in asked.items():
        between = _between_question_and_answer(nb, i)
        if between is None:
            found.append(f"{key}: no '### Exercise' heading before its answer cell {i}")
        elif between:
            found.append(f"{key}: code cell(s) {between} between its question and its answer cell {i}")
    minutes = sum(p["minutes"] for p in _model().sections(nb, [0.0] * len(nb.cells)))
    if minutes > _model().CORE_MINUTES:
        found.append(f"{minutes:.0f} learner-minutes by the time model, more than {_model().CORE_MINUTES}")
    return found


def _function_checked(source: str) -> str | None:
    match = re.search(r"check\(\s*[\"'][^\"']+[\"']\s*,\s*(\w+)", source)
    return match.group(1) if match else None


def _runs_later(nb, i: int) -> bool:
    """Does a cell after ``i`` plug the function that cell ``i`` checks into the engine?"""
    name = _function_checked(nb.cells[i].source)
    later = [c.source for c in nb.cells[i + 1:] if c.cell_type == "code"]
    return bool(name) and any(re.search(rf"\b{name}\b", args) for s in later for args in PLUG.findall(s))


def _between_question_and_answer(nb, i: int) -> list[int] | None:
    """The code cells between cell i's exercise heading and cell i that are not part of the exercise (a listing
    that only defines functions is); None if no heading comes before it."""
    code = []
    for j in range(i - 1, -1, -1):
        cell = nb.cells[j]
        if cell.cell_type == "markdown" and re.search(r"^#{2,4} .*Exercise", cell.source, re.M | re.I):
            return code[::-1]
        if cell.cell_type == "markdown" and re.search(r"^## ", cell.source, re.M):
            return None
        if cell.cell_type == "code" and not _only_definitions(cell.source):
            code.append(j)
    return None


def _only_definitions(source: str) -> bool:
    import ast

    try:
        body = ast.parse(source).body
    except SyntaxError:  # an exercise's cell with ... to fill in, say: not a listing
        return False
    return bool(body) and all(isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)) for n in body)


def test_the_notebooks_are_the_cores_and_their_companions():
    every = sorted(p.relative_to(NOTEBOOKS).as_posix() for p in NOTEBOOKS.rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
    assert sorted(p.relative_to(NOTEBOOKS).as_posix() for p in course_notebooks(NOTEBOOKS)) == every
    for path in course_notebooks(NOTEBOOKS, cores=False):
        assert (NOTEBOOKS / path.name.replace("_deeper", "")).exists(), f"{path.name}: a companion with no core"


def test_every_core_has_its_companion():
    assert [p.name for p in CORES if not companion(p).exists()] == []
    assert len(CORES) == 10


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name[:2])
def test_a_core_keeps_to_its_limits(path):
    assert problems(path) == []


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name[:2])
def test_a_core_ends_by_pointing_to_its_companion_s_sections(path):
    nb = nbformat.read(path, as_version=4)
    deeper = nbformat.read(companion(path), as_version=4)
    anchors = {re.sub(r"\s", "-", h.strip()) for c in deeper.cells if c.cell_type == "markdown"
               for h in re.findall(r"^#{1,4} (.+)$", c.source, re.M)}
    going = [c for c in nb.cells if c.cell_type == "markdown" and re.search(r"^## Going deeper", c.source, re.M)]
    assert going, f"{path.name}: no '## Going deeper' section"
    links = re.findall(rf"\]\(deeper/{re.escape(companion(path).name)}#([^)]+)\)", going[-1].source)
    assert links, f"{path.name}: 'Going deeper' links to none of {companion(path).name}'s sections"
    assert set(links) <= anchors, f"links to sections that do not exist: {set(links) - anchors}"
    first = deeper.cells[0].source
    assert f"](../{path.name})" in first, f"{companion(path).name} does not link back to its core in its first cell"


def says_how_to_see_progress(nb) -> bool:
    """Does the core's Checkpoint cell say, in one line, how to see your progress (and name your file)?"""
    cells = [c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## Checkpoint")]
    lines = [line for c in cells for line in c.splitlines() if "progress()" in line]
    return any("import progress" in line and "progress(name=" in line for line in lines)


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name[:2])
def test_a_core_says_how_to_see_your_progress(path):
    assert says_how_to_see_progress(nbformat.read(path, as_version=4)), \
        f"{path.name}: its Checkpoint cell does not say how to see your progress (progress(), progress(name=...))"


def test_a_checkpoint_without_the_progress_line_is_found():
    md = nbformat.v4.new_markdown_cell
    line = '`from haaw.course.exercises import progress; progress()` shows it; `progress(name="You")` names it.'
    assert says_how_to_see_progress(nbformat.v4.new_notebook(cells=[md(f"## Checkpoint\n\nYou can now: x.\n\n{line}")]))
    assert not says_how_to_see_progress(nbformat.v4.new_notebook(cells=[md("## Checkpoint\n\nYou can now: x.")]))
    assert not says_how_to_see_progress(nbformat.v4.new_notebook(cells=[md(f"## Going deeper\n\n{line}")]))


# --- the limits can fail --------------------------------------------------------------------------------------
def _core(tmp_path, cells) -> Path:
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / "99_planted.ipynb"
    nbformat.write(nb, path)
    return path


def _fit():
    """A small core within every limit: two exercises, the code one plugged into the engine after."""
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    return [md("# 99 · Planted\n\nA short text."),
            md("## 1. One\n\n### Exercise 1\n\n> dL/dw?"), code('check("01-dL/dw", 12)'),
            md("### Exercise 2 (code)\n\n> Write it."), code("def mul_local(a, b):\n    return a * b, (b, a)\n\n"
                                                            'check("01-mul-local", mul_local)'),
            code("with yours(mul=mul_local):\n    pass")]


def test_a_core_within_its_limits_passes(tmp_path):
    assert problems(_core(tmp_path, _fit())) == []


@pytest.mark.parametrize("plant, says", [
    ("long", "words of prose, more than 2000"),
    ("wall", "words, more than 200 in one markdown cell"),
    ("code", "lines, more than 25 in one code cell"),
    ("fifth", "5 exercises"),
    ("one", "1 exercises"),
    ("unplugged", "no code exercise whose function a later cell runs"),
    ("between", "code cell(s) [2] between its question"),
    ("no heading", "no '### Exercise' heading before its answer cell"),
    ("slow", "learner-minutes by the time model, more than 60"),
])
def test_a_planted_breach_fails_the_core(tmp_path, plant, says):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = _fit()
    if plant == "long":
        cells += [md(" ".join(["word"] * 190)) for _ in range(11)]
    elif plant == "wall":
        cells.append(md(" ".join(["word"] * 201)))
    elif plant == "code":
        cells.append(code("\n".join(f"x{i} = {i}" for i in range(26))))
    elif plant == "fifth":
        for key in ("01-step", "01-chain", "02-fan-out"):
            cells += [md("### Exercise\n\n> ?"), code(f'check("{key}", 1)')]
    elif plant == "one":
        cells = cells[:3]
    elif plant == "unplugged":
        cells = cells[:-1]
    elif plant == "between":
        cells.insert(2, code("print('a cell that is not part of the exercise')"))
    elif plant == "no heading":
        cells[1] = md("## 1. One\n\n> dL/dw?")
    elif plant == "slow":
        cells += [code(f"x = {i}") for i in range(60)]
    assert any(says in p for p in problems(_core(tmp_path, cells))), problems(_core(tmp_path, cells))


def test_the_core_path_takes_at_most_ten_hours_and_the_readme_says_how_many():
    model = _model()
    notebooks = [nbformat.read(core, as_version=4) for core in CORES]
    minutes = sum(p["minutes"] for nb in notebooks for p in model.sections(nb, [0.0] * len(nb.cells)))
    assert minutes <= 600, f"the cores 01-10 take {minutes:.0f} learner-minutes by the time model"
    words = {8: "eight", 9: "nine", 10: "ten"}
    said = re.search(r"core path takes about\s+(\w+)\s+learner-hours", (ROOT / "README.md").read_text())
    assert said and said.group(1) == words.get(round(minutes / 60)), (minutes, said and said.group(1))


def plans_over_their_slot(plans: dict) -> list[str]:
    model = _model()
    notebooks = course_notebooks(NOTEBOOKS)
    measured = model.stored_measurements(notebooks)
    return [f"{name}, day {day}: {total:.0f} minutes in a slot of {slot}" for name, (slot, steps) in plans.items()
            for day, (total, _) in enumerate(model.plan_days(steps, notebooks, measured), 1) if total > slot]


def test_every_plan_fits_its_slot_and_the_two_hours_reach_the_learner_s_backward():
    plans = _model().PLANS
    assert plans_over_their_slot(plans) == []
    planted = {"two whole cores in two hours": (120, ["launch", ("01", None), "break", ("02", None)])}
    assert [p.split(":")[0] for p in plans_over_their_slot(planted)] == ["two whole cores in two hours, day 1"]
    _, two_hours = plans["A 2-hour session"]
    (taken,) = [last for step in two_hours if isinstance(step, tuple) for number, last in [step] if number == "02"]
    nb = nbformat.read(next(p for p in CORES if p.name.startswith("02")), as_version=4)
    end = next(i for i, c in enumerate(nb.cells) if re.search(rf"^## {taken + 1}\. ", c.source, re.M))
    assert any('check("02-backward"' in c.source for c in nb.cells[:end]), "two hours end before 02's backward"
