"""What the claims tests share.

Tests marked upstream assert what NumPy, ml_dtypes or PyTorch do, which the notebook states; they fail when a
new release changes that, not when haaw breaks (``pytest -m upstream`` runs them alone after an upgrade).
"""
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture(scope="session")
def stored_output():
    """``stored_output("10", "adam_losses = train(")``: the text that the first code cell of notebook 10 (its core,
    then its companion) holding that source printed, as the notebook is stored. nbval runs the notebook in the same suite and
    fails where a fresh run prints anything else, so a claim asserted on this text holds for a fresh run.
    For the claims whose evidence takes seconds to compute (a long training, worker processes), this saves
    computing it twice. Without nbformat (the course extra) the tests that ask for it are skipped."""
    nbformat = pytest.importorskip("nbformat")

    def printed(number: str, source: str) -> str:
        paths = [*NOTEBOOKS.glob(f"{number}_*.ipynb"), *NOTEBOOKS.glob(f"deeper/{number}_*_deeper.ipynb")]
        cells = [c for path in paths for c in nbformat.read(path, as_version=4).cells]
        cell = next(c for c in cells if c.cell_type == "code" and source in c.source)
        return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    return printed
