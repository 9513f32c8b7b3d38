"""What nbval cannot see: the notebooks are well-formed lessons, stored as run, and their student edition."""
import json
import re
from pathlib import Path

import nbformat
import pytest

from haaw.course.exercises import REGISTRY
from haaw.course.editions import student_notebook
from haaw.course.exercises.code import CodeExercise

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_course_has_its_first_notebooks_in_order():
    assert [p.name[:2] for p in NOTEBOOKS][:2] == ["01", "02"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_is_a_complete_lesson(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "**You will learn**" in nb.cells[0].source
    assert "## Checkpoint" in nb.cells[-1].source
    keys = re.findall(r"check\(\"([^\"]+)\"", text)
    assert 3 <= len(keys) <= 8, "three to eight exercises"
    assert any(isinstance(REGISTRY[k], CodeExercise) for k in keys), "at least one in code"
    assert "explorer" in text or "stepper" in text, "at least one interactive explorer"
    assert "%matplotlib inline" in code_cells(nb)[0].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_is_stored_executed_in_order_without_errors(path):
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
    original = nbformat.read(path, as_version=4)
    nb = student_notebook(nbformat.read(path, as_version=4))
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert nb.cells[first].source.startswith("%matplotlib inline\n")
    assert 'os.environ["HAAW_SOLUTIONS"] = "off"' in nb.cells[first].source
    assert nb.cells[first].source.endswith(original.cells[first].source.partition("\n")[2])
    exercises = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and re.search(r"check\(\s*[\"']", c.source)]
    assert exercises and all(not nb.cells[i].outputs and nb.cells[i].execution_count is None for i in exercises)
    assert [(c.source, c.get("outputs")) for i, c in enumerate(nb.cells) if i != first and i not in exercises] == \
        [(c.source, c.get("outputs")) for i, c in enumerate(original.cells) if i != first and i not in exercises]
    assert [c.source for c in nb.cells][first + 1:] == [c.source for c in original.cells][first + 1:]
