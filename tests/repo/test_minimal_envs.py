"""Every test file collects with only what the base tier declares: haaw's dependencies (pyproject.toml) and pytest.

A cheap guard for what scripts/minimal_envs.py checks in earnest. That script builds the minimal environments and
runs every file in them (a minute or two); this collects each file, in a process of its own, in the environment at
hand with every installed package hidden but pyproject.toml's dependencies, pytest, and what those require. A file
that imports torch, matplotlib, hypothesis, nbformat... at its top, before an importorskip, is then a collection
error, named here. (A test that imports one in its body without importorskip is found only by the script, which
runs the tests.)

The packages are hidden as tests/plugins/haaw_fast_start.py hides one: ``sys.modules[name] = None``, so that
``import name`` raises ModuleNotFoundError, as where it is not installed, and ``importlib.util.find_spec(name)``
is None (a finder on sys.meta_path that raised would break the code that asks find_spec first). pytest's
plugins installed by other packages are not loaded either (PYTEST_DISABLE_PLUGIN_AUTOLOAD), as they would not be.
"""
import functools
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # a requirement of pytest's, so declared for the base tier

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TEST_FILES = sorted(p for p in (ROOT / "tests").rglob("test_*.py") if "plugins" not in p.parts)
# what the base tier does not declare and a test file may still import: each must be hidden where installed
NOT_DECLARED = ["torch", "matplotlib", "hypothesis", "IPython", "ipywidgets", "nbformat", "nbclient", "nbval",
                "xdist", "threadpoolctl", "micrograd", "playwright", "jupyterlab", "jupyter_client", "jupyter_core",
                "jupyter_server"]
DECLARED = ["numpy", "ml_dtypes", "pytest", "haaw"]


@functools.cache
def undeclared() -> list[str]:
    """The top-level modules of every installed distribution that is neither declared for the base tier (pyproject's
    dependencies, pytest, haaw) nor required by one that is, with no extras, in this Python."""
    def name(text):
        return re.sub(r"[-_.]+", "-", text).lower()

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]] + [Requirement("pytest"), Requirement(project["name"])]
    declared = set()
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        if name(requirement.name) not in declared:
            declared.add(name(requirement.name))
            try:
                todo += [Requirement(r) for r in metadata.requires(requirement.name) or []]
            except metadata.PackageNotFoundError:
                pass
    return sorted(top for top, dists in metadata.packages_distributions().items()
                  if not any(name(d) in declared for d in dists) and top not in sys.stdlib_module_names
                  and top != "conftest" and not top.startswith("test"))


# run first in the child: each name in its first argument hidden, unless Python's start-up imported it already
HIDE = "import sys\nfor top in sys.argv.pop(1).split(','):\n    sys.modules.setdefault(top, None)\n"
COLLECT = HIDE + "import pytest\nraise SystemExit(pytest.main(sys.argv[1:]))\n"


def hidden_run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CI")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run([sys.executable, "-c", code, ",".join(undeclared()), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def collection_errors(paths) -> list[str]:
    """``"path: what went wrong"`` for each file that does not collect with the undeclared packages hidden; one
    pytest process collects them all (a process a file took 27 s here, this 3)."""
    run = hidden_run(COLLECT, "--collect-only", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
                     *map(str, paths))
    if run.returncode in (0, 5):  # 5: nothing collected (every file skipped whole, say)
        return []
    errors = []
    for block in re.split(r"^_+ ERROR collecting ", run.stdout, flags=re.M)[1:]:
        where = re.search(r"importing test module '([^']+)'", block) or re.match(r"(\S+)", block)
        why = [line[4:].strip() for line in block.splitlines() if line.startswith("E   ")]
        errors.append(f"{where.group(1)}: {why[-1] if why else block[:300]}")
    return errors or [(run.stdout + run.stderr)[-1500:]]


def test_every_test_file_collects_with_only_the_base_tier_s_packages():
    assert collection_errors(TEST_FILES) == []


def test_the_undeclared_packages_are_hidden_and_the_declared_ones_are_not():
    names = NOT_DECLARED + DECLARED
    report = ("import importlib, importlib.util, json\nfound = {}\nfor n in %r:\n"
              "    try:\n        importlib.import_module(n)\n        found[n] = 'imported'\n"
              "    except ImportError:\n        found[n] = 'missing'\n"
              "print(json.dumps({n: [found[n], importlib.util.find_spec(n) is None] for n in found}))\n") % names
    seen = json.loads(hidden_run(HIDE + report).stdout)  # name -> [imported or missing, find_spec gives None]
    for n in NOT_DECLARED:
        assert seen[n] == ["missing", True], f"{n} is importable with the undeclared packages hidden"
    assert {n: seen[n] for n in DECLARED} == {n: ["imported", False] for n in DECLARED}


def test_a_test_file_that_imports_an_undeclared_package_at_its_top_is_named(tmp_path):
    """The test of the test: a copy of a test file collects; the same copy with `import hypothesis` planted at its
    top does not, and the guard names it."""
    source = (ROOT / "tests" / "engine" / "test_value.py").read_text()
    clean, planted = tmp_path / "clean" / "test_value.py", tmp_path / "planted" / "test_planted.py"
    for path, text in ((clean, source), (planted, "import hypothesis  # planted\n" + source)):
        path.parent.mkdir()
        path.write_text(text)
    assert collection_errors([clean]) == []
    (error,) = collection_errors([clean, planted])
    assert error.startswith(f"{planted}: ") and "hypothesis" in error
