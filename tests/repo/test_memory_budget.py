"""The memory check of tests/plugins/haaw_notebooks.py can fail: a notebook that grows past the limit fails its
last cell."""
import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "plugins" / "haaw_notebooks.py"


def notebook(*sources):
    cells = [{"cell_type": "code", "execution_count": i + 1, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": source} for i, source in enumerate(sources)]
    return json.dumps({"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                    "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def run_big_notebook(pytester, monkeypatch, build: str):
    """A notebook that holds 100 MiB, under a 130 MiB limit, with the plugin (as the run's conftest.py) seeing the
    given torch build. It runs in this process: a new one would import pytest and its plugins again (3 s of CPU)."""
    pytest.importorskip("nbval")  # the test extra: it runs the notebook
    conftest = PLUGIN.read_text() + f"\ntorch_build = lambda: {build!r}\n"
    (pytester.path / "conftest.py").write_text(conftest)
    (pytester.path / "big.ipynb").write_text(notebook(
        "import numpy as np\nheld = np.ones(100 * 2**20 // 8)", "x = 1"))
    monkeypatch.setenv("HAAW_MEMORY_LIMIT_MIB", "130")  # a kernel alone is about 60 MiB; 100 MiB more passes it
    return pytester.runpytest_inprocess("--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                                        "-p", "no:benchmark", "big.ipynb")


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="memory is read from Linux's /proc")
def test_a_notebook_over_the_memory_limit_fails_its_last_cell(pytester, monkeypatch):
    # the budget is enforced for the CPU build of torch, whatever is installed here
    result = run_big_notebook(pytester, monkeypatch, "cpu")
    result.assert_outcomes(passed=2, failed=1)  # the cell that grew the memory passes, the last cell fails, the cells
    # run again pass
    result.stdout.fnmatch_lines(["*big.ipynb: the kernel and its processes reached * MiB while the notebook ran, "
                                 "over the 130 MiB a Binder session is guaranteed*",
                                 "notebook memory (kernel and its processes, peak while it ran): bi * MiB"])


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="memory is read from Linux's /proc")
def test_with_a_gpu_build_of_torch_the_budget_is_not_enforced_and_the_run_says_why(pytester, monkeypatch):
    """The budget is checked with the CPU build; a learner with PyPI's CUDA build must not fail it."""
    result = run_big_notebook(pytester, monkeypatch, "gpu")
    result.assert_outcomes(passed=3)  # two cells, and the two run again
    result.stdout.fnmatch_lines(["notebook memory (kernel and its processes, peak while it ran): bi * MiB",
                                 "notebook memory: the installed torch is a GPU (CUDA or ROCm) build*not enforced*"])


def _plugin():
    spec = importlib.util.spec_from_file_location("haaw_notebooks_copy", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("version_py, build", [
    ("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n", "cpu"),
    ("__version__ = '2.14.1+cu130'\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n", "gpu"),
    ("__version__ = '2.13.0'\ncuda = None\nrocm: Optional[str] = '6.4'\n", "gpu"),
])
def test_the_torch_build_is_read_from_torchs_own_version_file(tmp_path, monkeypatch, version_py, build):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text("from typing import Optional\n" + version_py)
    module = _plugin()
    fake = importlib.machinery.ModuleSpec("torch", None, is_package=True)
    fake.submodule_search_locations = [str(tmp_path / "torch")]
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: fake if name == "torch" else None)
    assert module.torch_build() == build
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    assert module.torch_build() == "none"
