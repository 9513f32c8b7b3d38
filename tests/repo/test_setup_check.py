"""Notebook 00, the setup check, run where it exists for: kernels that lack the course's packages.

The stored run (strict nbval) is a full install, where every line says ok. Here the same notebook runs in a
kernel of this Python whose imports cannot see some packages, as a fresh environment with only ipykernel (and then
matplotlib) would be: a finder put in front of every other hides the packages and their installed records, before
ipykernel starts. No cell may raise; what must be fixed says FIX, with advice for where it runs.
"""
import json
import sys
from pathlib import Path

import pytest

from haaw.tools.crosscheck import SKIP_NOTE

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "00_setup_check.ipynb"
COURSE = {"numpy", "ml_dtypes", "matplotlib", "ipywidgets", "threadpoolctl", "haaw", "torch"}

# The kernel: hide the named packages (argv[1], comma-separated) from import and from importlib.metadata, then
# start ipykernel as `python -m ipykernel_launcher` would.
LAUNCH = r"""
import sys
hidden = set(sys.argv.pop(1).split(",")) - {""}

def _hidden(name):
    return name.replace("-", "_").lower().partition(".")[0] in hidden

class Hide:
    def __init__(self, finder):
        self.finder = finder
    def find_spec(self, name, path=None, target=None):
        return None if _hidden(name) else self.finder.find_spec(name, path, target)
    def find_distributions(self, *args, **kwargs):
        found = getattr(self.finder, "find_distributions", None)
        return (d for d in (found(*args, **kwargs) if found else ()) if not _hidden(d.metadata["Name"] or ""))
    def __getattr__(self, name):
        return getattr(self.finder, name)

sys.meta_path[:] = [Hide(f) for f in sys.meta_path if hasattr(f, "find_spec")]
assert not [m for m in sys.modules if _hidden(m)], "imported before the kernel started"
from ipykernel.kernelapp import launch_new_instance
launch_new_instance()
"""


def run_setup_check(tmp_path, monkeypatch, hidden=(), env=None):
    """Run notebook 00 in a kernel that cannot see ``hidden``: [(cell source, printed text, error or None)]."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    spec = tmp_path / "share" / "jupyter" / "kernels" / "hidden"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", LAUNCH, ",".join(sorted(hidden)), "-f", "{connection_file}"],
        "display_name": "packages hidden", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    monkeypatch.setenv("HAAW_PROGRESS", "off")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # haaw is this checkout's, unless hidden
    for name in ("BINDER_LAUNCH_HOST", "BINDER_REPO_URL", "BINDER_REQUEST", "HAAW_NO_TORCH"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="hidden", timeout=120, allow_errors=True,
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
            cells.append((cell.source, printed, errors[0] if errors else None))
    return cells


def fixes(cells):
    """The checks that said FIX, each with the advice indented under it (as one text)."""
    found, check = {}, None
    for line in "".join(printed for _, printed, _ in cells).splitlines():
        if line.startswith("FIX  "):
            check = line[5:]
            found[check] = ""
        elif check and line.startswith("       "):
            found[check] += line.strip().removeprefix("-> ") + "\n"
        else:
            check = None
    return found


def assert_runs_through(cells):
    assert [(source[:60], error) for source, _, error in cells if error] == []
    for source, printed, _ in cells[1:-1]:  # every check's cell says ok or FIX (or that PyTorch is skipped)
        lines = [line for line in printed.splitlines() if line.strip()]
        assert lines and all(line.startswith(("ok   ", "FIX  ", "       ", "Figure: ")) or line == SKIP_NOTE
                             for line in lines), (source[:60], printed)


@pytest.mark.parametrize("where", ["laptop", "binder"])
def test_in_a_bare_kernel_every_cell_runs_and_says_what_to_fix(tmp_path, monkeypatch, where):
    binder = {"BINDER_LAUNCH_HOST": "https://mybinder.org/"} if where == "binder" else {}
    cells = run_setup_check(tmp_path, monkeypatch, hidden=COURSE, env=binder)
    assert_runs_through(cells)
    first = cells[0][1]
    assert f"This notebook runs in: {sys.executable} (Python {'.'.join(map(str, sys.version_info[:3]))}" in first
    assert "numpy (missing)" in first and "haaw (missing)" in first
    assert ("Where: Binder" if binder else "Where: this computer") in first
    found = fixes(cells)
    assert {f"{name} imports" for name in COURSE - {"torch"}} == {what.split(" (")[0] for what in found
                                                                  if " imports (" in what}
    assert {"the engine runs", "figures are drawn", "the explorers' widgets are installed"} <= set(found)
    advice = found["haaw imports (the course's own package)"]
    if binder:
        assert "open the course's Binder link again" in advice and "pip install" not in advice
    else:  # install into the kernel's own Python, or pick the kernel that has the course
        assert f'"{sys.executable}" -m pip install -r requirements-no-torch.txt' in advice
        assert f'cd "{ROOT}"' in advice and "Kernel -> Change Kernel" in advice and "ipykernel install" in advice
    torch_cell = next(printed for source, printed, _ in cells if "optional_torch" in source)
    assert torch_cell.strip() == SKIP_NOTE  # optional: a note, not a FIX
    assert cells[-1][1].startswith(f"{len(found)} thing(s) to fix")


def test_with_only_matplotlib_the_figure_shows_and_the_course_is_asked_for(tmp_path, monkeypatch):
    cells = run_setup_check(tmp_path, monkeypatch, hidden=COURSE - {"matplotlib", "numpy"})
    assert_runs_through(cells)
    found = fixes(cells)
    assert "figures are drawn" not in found and "numpy imports (the engine's arrays)" not in found
    assert {"haaw imports (the course's own package)", "ipywidgets imports (the explorers)", "the engine runs",
            "the explorers' widgets are installed"} <= set(found)
    assert any(printed.startswith("Figure: the loss") for _, printed, _ in cells)


def test_in_a_full_kernel_every_line_says_ok(tmp_path, monkeypatch):
    cells = run_setup_check(tmp_path, monkeypatch)
    assert_runs_through(cells)
    assert fixes(cells) == {}
    assert cells[-1][1] == "All set: open 01_chain_rule.ipynb.\n"


@pytest.mark.parametrize("where", ["laptop", "binder"])
def test_an_unsupported_python_is_told_how_to_get_a_supported_one(monkeypatch, capsys, where):
    nbformat = pytest.importorskip("nbformat")
    first = next(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code")
    monkeypatch.setattr(sys, "version_info", (3, 14, 0, "final", 0))
    if where == "binder":
        monkeypatch.setenv("BINDER_REPO_URL", "https://github.com/haaw-course/haaw")
    exec(first, {})
    found = fixes([("", capsys.readouterr().out, None)])
    advice = found["Python 3.14.0: the course supports 3.11, 3.12 and 3.13"]
    if where == "binder":
        assert "binder/runtime.txt" in advice
    else:
        for way in ("uv venv --python 3.13", "conda create -n haaw python=3.13", "pyenv install 3.13",
                    "python.org", "ipykernel install"):
            assert way in advice
