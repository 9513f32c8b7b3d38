"""How the suite is put together: what conftest.py's shortcuts rely on."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_browser_module_has_browser_tests():
    """`pytest -m browser` collects tests/browser/test_in_jupyterlab.py alone (conftest.py): a browser test anywhere
    else would never run."""
    marked = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
                    if path != Path(__file__).resolve()
                    and re.search(r"mark\.browser\b|markers.*browser", path.read_text()))
    assert marked == ["tests/browser/test_in_jupyterlab.py"]


def test_a_test_file_runs_on_its_own_without_nbval_or_xdist():
    """pyproject.toml forces neither: `pytest tests/engine/test_ops.py` is one process with plain pytest. (That
    it needs no other package than pytest, numpy and ml_dtypes was checked once in a venv holding only those.)"""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "pytest", "tests/engine/test_ops.py", "-q", "-p", "no:xdist",
                             "-p", "no:nbval", "-p", "no:benchmark", "-p", "no:randomly"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"\d+ passed", result.stdout)
