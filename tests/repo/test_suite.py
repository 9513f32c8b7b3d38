"""How the suite is put together: what conftest.py's shortcuts rely on."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]


def test_only_the_browser_module_has_browser_tests():
    """`pytest -m browser` collects tests/browser alone (conftest.py): a browser test anywhere else would never run."""
    marked = sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("*.py")
                    if path != Path(__file__).resolve()
                    and re.search(r"mark\.browser\b|markers.*browser", path.read_text()))
    assert marked == ["tests/browser/test_in_jupyterlab.py", "tests/browser/test_site.py"]


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


def test_a_test_that_seeds_haaw_leaves_the_next_test_the_generator_it_found(pytester):
    """conftest.py's autouse fixture: haaw.manual_seed in one test does not reach the next."""
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile('''
        import haaw
        import haaw.nn.generator as generator

        found = []

        def test_seeds():
            found.append(generator._generator.bit_generator.state)
            haaw.manual_seed(5)

        def test_after_it():
            assert generator._generator.bit_generator.state == found[0]
    ''')
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:benchmark").assert_outcomes(passed=2)



def test_the_longest_notebook_is_handed_out_first():
    """conftest.py orders the work by the stored run times, the longest notebook first, each notebook's cells in
    order: handed out last, notebook 10 kept one xdist worker busy while the other waited (89 s against 80)."""
    import json
    import subprocess
    import sys

    pytest.importorskip("nbval")
    seconds = json.loads((ROOT / "docs" / "notebook-measurements.json").read_text())
    longest = max((name for name in seconds if name[:2].isdigit()), key=lambda name: seconds[name]["seconds"])
    # a core is notebooks/NN_name.ipynb, a companion notebooks/deeper/NN_name_deeper.ipynb: either may be the longest
    longest = f"deeper/{longest}" if longest.endswith("_deeper.ipynb") else longest
    listed = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--co", "-q", "-m", "not browser",
                             "-p", "no:randomly"], cwd=ROOT, capture_output=True, text=True, timeout=300).stdout
    ids = [line for line in listed.splitlines() if "::" in line]
    where = f"notebooks/{longest}"
    assert ids[0] == f"{where}::Cell 0", ids[:3]
    cells = [int(i.rsplit(" ", 1)[1]) for i in ids if i.startswith(f"{where}::Cell ")]
    assert cells == sorted(cells) and ids[len(cells)].endswith("every cell again, last first")


def _commands(text: str) -> list:
    """The test and lint commands of a shell script or a README's code block, comments taken off."""
    return [re.sub(r"\s+#.*$", "", line).strip() for line in text.splitlines()
            if re.match(r"\s*(pytest|ruff)\b", line)]


def test_ci_runs_the_readme_s_commands_and_with_them_nbgrader_s_round_trip():
    """.ci/run is the README's install and test commands; the tier they share holds the nbgrader round trip, whose
    tool the install pins (the learners' Binder image does not have it)."""
    readme = (ROOT / "README.md").read_text().split("## Tests", 1)[1].split("```", 2)[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert _commands(ci) and set(_commands(ci)) <= set(_commands(readme)), "CI runs what the README says, no more"
    tier = next(c for c in _commands(ci) if '-m "not browser"' in c)
    assert "pip install -r requirements.txt" in ci and tier in _commands(readme)
    assert re.search(r"^nbgrader==", (ROOT / "requirements-no-torch.txt").read_text(), flags=re.MULTILINE)
    assert "nbgrader" not in (ROOT / "binder" / "requirements.txt").read_text().lower()
    source = (ROOT / "tests" / "course" / "test_nbgrader.py").read_text()
    marks = re.search(r"((?:@pytest\.mark\.\w+\n)+)def test_nbgrader_generates_autogrades", source).group(1)
    assert "browser" not in marks and "mark.nbgrader" in marks  # so the "not browser" tier runs it
