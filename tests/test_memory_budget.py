"""The memory check of conftest.py can fail: a notebook that grows past the limit fails its last cell."""
import json
import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[1]


def notebook(*sources):
    cells = [{"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                    "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="memory is read from Linux's /proc")
def test_a_notebook_over_the_memory_limit_fails_its_last_cell(pytester, monkeypatch):
    shutil.copy(ROOT / "conftest.py", pytester.path / "conftest.py")
    (pytester.path / "big.ipynb").write_text(notebook(
        "import numpy as np\nheld = np.ones(100 * 2**20 // 8)", "x = 1"))
    monkeypatch.setenv("HAAW_MEMORY_LIMIT_MIB", "130")  # a kernel alone is about 60 MiB; 100 MiB more passes it
    # in this process: a new one would import pytest and its plugins again (about 3 s of CPU)
    result = pytester.runpytest_inprocess("--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                                          "-p", "no:benchmark", "big.ipynb")
    result.assert_outcomes(passed=1, failed=1)  # the cell that grew the memory passes; the last cell fails
    result.stdout.fnmatch_lines(["*big.ipynb: the kernel and its processes reached * MiB while the notebook ran, "
                                 "over the 130 MiB a Binder session is guaranteed*",
                                 "notebook memory (kernel and its processes, peak while it ran): bi * MiB"])
