"""How the suite is put together: what conftest.py's shortcuts rely on."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_browser_module_has_browser_tests():
    """`pytest -m browser` collects tests/test_in_jupyterlab.py alone (conftest.py): a browser test anywhere
    else would never run."""
    marked = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
                    if path != Path(__file__).resolve()
                    and re.search(r"mark\.browser\b|markers.*browser", path.read_text()))
    assert marked == ["tests/test_in_jupyterlab.py"]
