"""pytest setup shared by every test: one BLAS thread per process, no progress file, the tiers (bare
``pytest`` is the everyday loop), and the suite's shortcuts (``pytest -m browser`` collects the browser tests alone; pytest-xdist keeps a notebook's cells,
and each module with a costly fixture, on one worker). What the suite does around the notebooks run
under nbval (PyTorch cells, the memory budget) is the plugin ``tests/plugins/haaw_notebooks.py``.
"""
import copy
import os
import sys
from pathlib import Path

import pytest

# The suite runs a worker per core. A BLAS (or torch) that also starts a thread per core makes the
# workers' small matrix products wait on each other, up to 30 times slower on a busy 2-core machine:
# one thread each, in this process and in every kernel and process it starts.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Kernels under test keep no learner progress file beside the notebooks (tests that need one name their own).
os.environ.setdefault("HAAW_PROGRESS", "off")
try:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # for a BLAS already loaded
except ImportError:
    pass

BROWSER_TESTS = Path(__file__).resolve().parent / "tests" / "browser"  # the one folder whose tests are marked browser


def _browser_only(config) -> bool:
    return (config.getoption("markexpr", "") or "").strip() == "browser"


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``pytest -m browser``: one process. Its tests share one JupyterLab and one browser and run one after
    another, so pytest-xdist's workers would only add their start-up."""
    if _browser_only(config) and getattr(config.option, "numprocesses", None):
        config.option.numprocesses, config.option.dist = None, "no"


def pytest_ignore_collect(collection_path, config):
    """``pytest -m browser`` collects only tests/browser, and bare ``pytest`` only the unit folders, instead of
    importing every test module and reading every notebook to select none of them (tests/repo/test_suite.py
    checks that no module outside tests/browser has the browser mark)."""
    if not collection_path.is_file():
        return None
    if _browser_only(config) and BROWSER_TESTS not in collection_path.resolve().parents:
        return True
    if config.stash.get(_EVERYDAY_KEY, False) and not _where(collection_path).startswith(UNIT_TESTS + ("conftest",)):
        return True
    return None


# The tiers (docs/testing.md). Everything outside the package's unit-test folders is slow by where it lives:
# the notebooks, the claims (each computes a figure again, some by training), the repository's policies, the
# differential programs and the browser. A slow test inside the unit folders carries the mark itself.
UNIT_TESTS = ("tests/engine/", "tests/nn/", "tests/tools/", "tests/course/", "tests/test_optim.py", "tests/test_amp.py")
EVERYDAY = "not slow and not browser"


def pytest_configure(config):
    """Bare ``pytest`` (no -m, no file or folder named) runs the everyday tier: ``-m "not slow and not browser"``."""
    if not config.getoption("markexpr", "") and config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        config.option.markexpr = EVERYDAY
        config.stash[_EVERYDAY_KEY] = True


_EVERYDAY_KEY = pytest.StashKey[bool]()


def pytest_report_header(config):
    if config.stash.get(_EVERYDAY_KEY, False):
        return ["tier: the everyday loop (-m \"not slow and not browser\"); everything but the browser: "
                "pytest -n auto --nbval -m \"not browser\""]
    return None


def _notebook_seconds() -> dict:
    """Each notebook's stored run time, from docs/notebook-measurements.json ({} if it cannot be read)."""
    import json

    try:
        stored = json.loads((Path(__file__).resolve().parent / "docs" / "notebook-measurements.json").read_text())
        return {name: float(m["seconds"]) for name, m in stored.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _where(path) -> str:
    """The path relative to the repository, as a string ("" outside it)."""
    root, path = Path(__file__).resolve().parent, Path(path).resolve()
    return path.relative_to(root).as_posix() if root in path.parents else ""


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if not _where(item.path).startswith(UNIT_TESTS) or getattr(item, "cell", None) is not None:
            item.add_marker(pytest.mark.slow)
    # The longest work first: under pytest-xdist a notebook is one unit of work, and notebook 10 (a third of a
    # minute with its cells run again) handed out last would leave one worker running it while the other waits.
    # The stored run times order the notebooks; a stable sort keeps each notebook's cells, and the rest, in order.
    seconds = _notebook_seconds()
    items.sort(key=lambda item: -seconds.get(Path(item.path).name, 0.0))


# Modules whose module-scoped fixture is costly (a trained model, a browser, a benchmark run): their
# tests stay together on one worker, so that the fixture is made once.
ONE_WORKER_MODULES = ("tests/browser/test_in_jupyterlab.py", "tests/claims/test_claims_nb10.py", "tests/repo/test_benchmarks.py")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: ignored when it is not loaded
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's work units: a notebook's cells go to one worker, in order (nbval runs them in one
    kernel); so do the modules above; every other test goes alone to whichever worker is free."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            return path if path.endswith(".ipynb") or path in ONE_WORKER_MODULES else nodeid

    return Scheduling(config, log)




@pytest.fixture(autouse=True)
def _haaw_state_restored():
    """Every test leaves haaw's module state as it found it: the layers' generator (``manual_seed``), and a
    learner's session (the exercises passed, the hints seen). The engine's modes, slots and hooks need nothing
    here: they are context variables, which every block that sets one resets. Modules not imported yet are left
    alone, so that a test file that needs only the engine imports only the engine."""
    saved = []
    for module_name, attribute in (("haaw.nn.generator", "_generator"), ("haaw.course.exercises.code", "_passed"),
                                   ("haaw.course.exercises.core", "_hints_shown")):
        module = sys.modules.get(module_name)
        if module is not None:
            saved.append((module, attribute, copy.deepcopy(getattr(module, attribute))))
    yield
    for module, attribute, value in saved:
        setattr(module, attribute, value)
