"""What nbval cannot see: the notebooks are well-formed lessons, stored as run, and their student edition."""
import html
import json
import re
from pathlib import Path

import pytest

from haaw.course.exercises import REGISTRY
from haaw.course.editions import course_notebooks, leaks, student_notebook, widget_leaks
from haaw.course.exercises.code import CodeExercise

NOTEBOOKS = course_notebooks(Path(__file__).resolve().parents[2] / "notebooks")
LESSONS = [p for p in NOTEBOOKS if not p.name.startswith("00")]  # 00 checks the setup: no lesson, no exercise
CORES = [p for p in LESSONS if p.parent.name != "deeper"]
COMPANIONS = [p for p in LESSONS if p.parent.name == "deeper"]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_course_has_its_setup_check_then_its_first_notebooks_in_order():
    assert [p.name[:2] for p in NOTEBOOKS][:3] == ["00", "01", "02"]


def test_the_setup_check_says_ok_or_what_to_fix_on_every_line():
    """The stored run, a full install: the first cell says which Python and packages it found (its output is this
    machine's, so nbval leaves it out), then every line is ok. The setup check where packages are missing:
    tests/repo/test_setup_check.py."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOKS[0], as_version=4)
    first, *rest = code_cells(nb)
    assert "nbval-ignore-output" in first.metadata.get("tags", [])
    said = "".join(o.get("text", "") for o in first.outputs if o.output_type == "stream").splitlines()
    assert [line.split(":")[0] for line in said] == ["This notebook runs in", "Where", "Installed", "ok   Python 3.11.7"]
    printed = "".join(o.get("text", "") for c in rest for o in c.outputs if o.output_type == "stream")
    lines = [line for line in printed.splitlines() if line.strip()]
    assert lines[-1] == "All set: open 01_chain_rule.ipynb."
    assert all(line.startswith(("ok   ", "Figure: ")) for line in lines[:-1]), printed
    assert sum(line.startswith("ok   ") for line in lines) >= 10


@pytest.mark.parametrize("path", CORES, ids=lambda p: p.name)
def test_each_core_is_a_complete_lesson(path):
    """Goals first, exercises with one in code, an explorer, and a checkpoint that ends the lesson; after it, only
    "Going deeper" (the companion's sections) or "Going further" (reading) may follow. How many exercises a core
    holds, and how long it is, is tests/repo/test_cores.py's."""
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "**You will learn**" in nb.cells[0].source
    last = next(i for i in range(len(nb.cells) - 1, -1, -1) if "## Checkpoint" in nb.cells[i].source)
    after = nb.cells[last + 1:]
    assert not after or after[0].source.startswith(("## Going deeper", "## Going further"))
    headings = [h for c in after if c.cell_type == "markdown" for h in re.findall(r"^## (.+)$", c.source, re.M)]
    assert all(h.startswith(("Going deeper", "Going further")) for h in headings), headings
    keys = re.findall(r"check\(\"([^\"]+)\"", text)
    assert keys and any(isinstance(REGISTRY[k], CodeExercise) for k in keys), "exercises, at least one in code"
    assert "explorer" in text or "stepper" in text, "at least one interactive explorer"
    assert "%matplotlib inline" in code_cells(nb)[0].source


@pytest.mark.parametrize("path", COMPANIONS, ids=lambda p: p.name)
def test_each_companion_says_what_it_assumes_and_links_back_to_its_core(path):
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(path, as_version=4)
    first = nb.cells[0].source
    core = path.name.replace("_deeper", "")
    assert first.startswith(f"# {path.name[:2]}+ · "), "the title: '# NN+ · <the core's title>: going deeper'"
    assert f"](../{core})" in first, f"the first cell links back to {core}"
    assert "%matplotlib inline" in code_cells(nb)[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_is_stored_executed_in_order_without_errors(path):
    nbformat = pytest.importorskip("nbformat")
    cells = code_cells(nbformat.read(path, as_version=4))
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1))
    for cell in cells:
        for out in cell.outputs:
            assert out.output_type != "error", cell.source
            assert "Error displaying widget" not in json.dumps(out)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_student_edition_is_the_notebook_with_solutions_off_and_exercise_outputs_cleared(path):
    """What the editions command writes. The browser test runs this edition, without PyTorch, and checks that
    every cross-check says it was skipped, every exercise that it was not attempted, and a solution is refused."""
    nbformat = pytest.importorskip("nbformat")
    original = nbformat.read(path, as_version=4)
    nb = student_notebook(nbformat.read(path, as_version=4))
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert nb.cells[first].source.startswith("%matplotlib inline\n") or path not in LESSONS  # 00 runs without matplotlib
    assert 'os.environ["HAAW_SOLUTIONS"] = "off"' in nb.cells[first].source
    assert nb.cells[first].source.endswith(original.cells[first].source.partition("\n")[2])
    exercises = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and re.search(r"check\(\s*[\"']", c.source)]
    assert exercises or path not in LESSONS
    assert all(not nb.cells[i].outputs and nb.cells[i].execution_count is None for i in exercises)
    # the text no longer points at solution(), which the edition refuses; nothing else in it changes
    assert [c.source for c in nb.cells if c.cell_type == "markdown"] == [
        re.sub(r",\s*`solution\([^)]*\)`[^.]*\.", ".", c.source) for c in original.cells if c.cell_type == "markdown"]
    assert not any("solution(" in c.source for c in nb.cells if c.cell_type == "markdown")
    assert [c.source for c in nb.cells if c.cell_type == "code"][1:] == \
        [c.source for c in original.cells if c.cell_type == "code"][1:]
    # every other code cell keeps its outputs, unless they give an answer asked above away, by the one rule the
    # edition's reader states (haaw.course.editions.leaks; tests/repo/test_editions.py plants a leak of each kind)
    away = {i for i, kind, _ in leaks(original) if kind == "output"}
    if widget_leaks(original):  # the explorers' saved state says an answer: it goes, and the views that show it
        away |= {i for i, c in enumerate(original.cells) if c.cell_type == "code" and any(
            "application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.get("outputs", []))}
    for i, (cell, was) in enumerate(zip(nb.cells, original.cells)):
        if cell.cell_type != "code" or i == first or i in exercises:
            continue
        if i in away:
            assert not cell.outputs and cell.execution_count is None, f"cell {i} gives an answer away"
        else:
            assert cell.get("outputs") == was.get("outputs"), f"cell {i} cleared for nothing"
    assert not [(i, k) for i, kind, k in leaks(nb) if kind == "output"]
    assert not [(i, k) for i, kind, k in leaks(nb) if kind == "markdown"], \
        "a markdown cell right under an exercise states its answer: the edition cannot clear text, rewrite it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_is_stored_with_its_description_in_words(path):
    """show_figure's two copies of the description: the figure's text/plain, and the caption printed under it,
    which a screen reader reads. A figure shown with plt.show() has "<Figure size …>" and no caption."""
    nbformat = pytest.importorskip("nbformat")
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        outputs = cell.get("outputs", [])
        for k, out in enumerate(outputs):
            if "image/png" not in out.get("data", {}):
                continue
            plain = out.data.get("text/plain", "")
            assert plain.startswith("Figure: ") and len(plain.split()) >= 12, f"cell {i}: {plain[:80]!r}"
            caption = outputs[k + 1] if k + 1 < len(outputs) else {}
            assert caption.get("output_type") == "stream" and caption.text.startswith(plain), \
                f"cell {i}: no caption printed under the figure"
            # the picture JupyterLab and the website show: the same PNG in an <img> with the description as alt
            page = out.data.get("text/html", "")
            alt = re.search(r'<img [^>]*\balt="([^"]*)"', page)
            assert alt and html.unescape(alt.group(1)) == plain.removeprefix("Figure: "), \
                f"cell {i}: the figure has no alt text from its description (re-run the notebook: show_figure adds it)"
            assert "".join(out.data["image/png"]).strip() in page, f"cell {i}: the <img> is not the figure's PNG"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_that_asks_for_pytorch_is_tagged_torch(path):
    """A cell that calls optional_torch() prints PyTorch's numbers where it is installed and a note where it is not:
    nbval can only compare it where torch is, so the tag tells the notebook plugin to skip it without torch."""
    nbformat = pytest.importorskip("nbformat")
    untagged = [i for i, c in enumerate(nbformat.read(path, as_version=4).cells) if c.cell_type == "code"
                and "optional_torch(" in c.source and "torch" not in c.metadata.get("tags", [])]
    assert untagged == [], f"{path.name}: cells {untagged} ask for PyTorch without the 'torch' tag"
