"""What nbval cannot see: the notebooks are well-formed lessons, and run without torch."""
import json
import os
import re
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
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


# Before each notebook in the shared kernel: a clean namespace, haaw imported afresh, no figure left open.
FRESH_START = """%reset -f
import sys
for _name in [name for name in sys.modules if name == "haaw" or name.startswith("haaw.")]:
    del sys.modules[_name]
import matplotlib.pyplot
matplotlib.pyplot.close("all")"""


@pytest.fixture(scope="module")
def kernel_without_torch():
    """One kernel for the student-edition runs on this worker, with torch counting as absent. Each notebook
    starts from FRESH_START instead of a new kernel: that saves the kernel's start and its imports (NumPy,
    matplotlib) for every notebook, about 2 s each; nbval runs every notebook in a new kernel anyway."""
    km = AsyncKernelManager(kernel_name="python3")
    run_sync(km.start_kernel)(env={**os.environ, "HAAW_NO_TORCH": "1"}, cwd=str(NOTEBOOKS[0].parent))
    yield km
    run_sync(km.shutdown_kernel)(now=True)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_student_edition_runs_without_torch_and_every_exercise_is_untouched(path, kernel_without_torch):
    """One run checks two things: the course works without PyTorch (every torch cell prints the skip note),
    and the student edition runs top to bottom with solutions switched off and every exercise untouched."""
    original = nbformat.read(path, as_version=4)
    nb = student_notebook(nbformat.read(path, as_version=4))
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    assert [c.source for i, c in enumerate(nb.cells) if i != first] == \
        [c.source for i, c in enumerate(original.cells) if i != first], "otherwise the same notebook"
    exercises = [c for c in code_cells(nb) if re.search(r"check\(\s*[\"']", c.source)]
    assert exercises and all(not c.outputs for c in exercises), "exercise outputs cleared"
    key = re.search(r"check\(\s*[\"']([^\"']+)", exercises[0].source).group(1)
    nb.cells.append(nbformat.v4.new_code_cell(f"print(solution({key!r}))"))
    nb.cells.insert(0, nbformat.v4.new_code_cell(FRESH_START))
    NotebookClient(nb, km=kernel_without_torch, timeout=120).execute()  # raises at a cell's error
    torch_cells = [c for c in code_cells(nb) if "torch" in c.metadata.get("tags", [])]
    assert torch_cells, "the notebook has torch cross-check cells"
    for cell in torch_cells:
        printed = "".join(o.get("text", "") for o in cell.outputs)
        assert printed.strip() == SKIP_NOTE
    for cell in exercises:
        printed = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        assert "Not attempted yet" in printed, cell.source
    assert "Solutions are switched off" in code_cells(nb)[-1].outputs[0]["text"]
