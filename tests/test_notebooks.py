"""What nbval cannot see: the notebooks are well-formed lessons, and run without torch."""
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from haaw.course.exercises import REGISTRY
from haaw.course.editions import student_notebook
from haaw.course.exercises.code import CodeExercise
from haaw.tools.crosscheck import SKIP_NOTE

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
def test_the_student_edition_runs_without_torch_and_every_exercise_is_untouched(path, monkeypatch):
    """One run checks two things: the course works without PyTorch (every torch cell prints the skip note),
    and the student edition runs top to bottom with solutions switched off and every exercise untouched."""
    monkeypatch.setenv("HAAW_NO_TORCH", "1")  # the kernel inherits it: torch counts as absent
    original = nbformat.read(path, as_version=4)
    nb = student_notebook(nbformat.read(path, as_version=4))
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert [c.source for i, c in enumerate(nb.cells) if i != first] == \
        [c.source for i, c in enumerate(original.cells) if i != first], "otherwise the same notebook"
    exercises = [c for c in code_cells(nb) if re.search(r"check\(\s*[\"']", c.source)]
    assert exercises and all(not c.outputs for c in exercises), "exercise outputs cleared"
    key = re.search(r"check\(\s*[\"']([^\"']+)", exercises[0].source).group(1)
    nb.cells.append(nbformat.v4.new_code_cell(f"print(solution({key!r}))"))
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    torch_cells = [c for c in code_cells(nb) if "torch" in c.metadata.get("tags", [])]
    assert torch_cells, "the notebook has torch cross-check cells"
    for cell in torch_cells:
        printed = "".join(o.get("text", "") for o in cell.outputs)
        assert printed.strip() == SKIP_NOTE
    for cell in exercises:
        printed = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        assert "Not attempted yet" in printed, cell.source
    assert "Solutions are switched off" in code_cells(nb)[-1].outputs[0]["text"]
