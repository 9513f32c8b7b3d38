"""pytest setup shared by the package tests and the notebooks run under nbval.

Notebook cells tagged ``torch`` only cross-check against PyTorch. Where torch is not
installed they are reported as skipped (with the reason), not run and not failed, which
is what the cells themselves do for a learner without torch.
"""
import importlib.util

import pytest

TORCH_MISSING = importlib.util.find_spec("torch") is None


def pytest_collection_modifyitems(items):
    if not TORCH_MISSING:
        return
    skip = pytest.mark.skip(reason="PyTorch is not installed: torch cross-check cell skipped")
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None and "torch" in cell.get("metadata", {}).get("tags", []):
            item.add_marker(skip)
