"""A pytest plugin for the notebooks run under nbval (``-p haaw_notebooks`` in pyproject.toml).

- Notebook cells tagged ``torch`` only cross-check against PyTorch. Where torch is not installed they
  are reported as skipped (with the reason), not run and not failed, which is what the cells
  themselves do for a learner without torch.
- While nbval runs a notebook, its kernel's memory, with every process the kernel starts, is sampled;
  the notebook's last cell fails if the peak passed 1 GiB, the memory a Binder session is guaranteed.
  The peaks are listed at the end of the run. The budget is Binder's, checked with PyTorch's CPU-only
  build, the larger case (Binder runs the course without PyTorch): where the installed torch is a GPU
  build (PyPI's default Linux wheel, whose CUDA libraries add about 400 MiB to every kernel that imports
  torch), the peaks are still listed but the budget is not enforced, and the run says why.
- A learner runs cells again: after nbval has run a notebook's last cell, every code cell it ran is run once
  more in the same kernel, from the last up to the first, and none may raise. Run that way, each cell meets
  what the cells below it leave behind, as when a learner who has run the whole notebook scrolls up and runs
  one cell again. This is one more test per notebook, ``notebooks/NN_name.ipynb::every cell again, last
  first``, which names the cell that failed.
- The notebooks run in a kernel of the Python that runs pytest (nbval's ``--nbval-current-env``).
- A figure's PNG is compared as nbval compares image/png, not at all: ``show_figure`` also stores it inside an
  <img alt="..."> as text/html, whose alt text is compared and whose bytes ``nbval-sanitize.cfg`` masks (used
  unless ``--nbval-sanitize-with`` names another file).

It imports nothing beyond the standard library and pytest, so a test file runs without nbval installed.
"""
import importlib.util
import os
import re
import threading
import time
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds, or runs kernels, notebooks or other processes")
    if hasattr(config.option, "nbval_current_env"):  # nbval is installed
        config.option.nbval_current_env = True
        sanitize = Path(__file__).with_name("nbval-sanitize.cfg")
        if (getattr(config.option, "nbval_sanitize_with", None) is None and not getattr(config.option, "sanitize_with", None)
                and sanitize.is_file()):
            config.option.nbval_sanitize_with = str(sanitize)


TORCH_MISSING = importlib.util.find_spec("torch") is None


def torch_build() -> str:
    """"cpu", "gpu" or "none", read from torch's own version.py without importing torch (a second of CPU).
    PyPI's default Linux wheel is a CUDA build (``cuda = '13.0'`` there); PyTorch's CPU index, conda-forge's
    CPU build and every macOS and Windows wheel say ``cuda = None``."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        return "none"
    try:
        text = Path(spec.submodule_search_locations[0], "version.py").read_text()
    except (OSError, TypeError, IndexError):
        return "cpu"
    return "gpu" if re.search(r"^(cuda|hip|rocm|xpu)\b[^=\n]*=\s*['\"]", text, re.MULTILINE) else "cpu"


GPU_TORCH_NOTE = ("the installed torch is a GPU (CUDA or ROCm) build, whose libraries add about 400 MiB to every kernel; "
                   "the memory budget is checked with the CPU-only build (Binder runs without PyTorch at all), so it "
                   "was not enforced (the README shows how to install the CPU-only build)")
MEMORY_LIMIT = int(os.environ.get("HAAW_MEMORY_LIMIT_MIB", 1024)) << 20  # what mybinder.org guarantees a user


def _children() -> dict:
    """pid -> parent pid, for every process (Linux's /proc)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _pss(pid: int) -> int:
    """Proportional set size in bytes: shared pages counted once across processes, as a container's limit sees them."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class KernelMemory:
    """Samples, four times a second and after every cell, the memory of every process this pytest process
    started. A sample reads each process's smaps_rollup, about 5 ms for a kernel that imported torch."""

    def __init__(self):
        self.notebook = None
        self.peaks: dict = {}
        self._thread = None

    def start(self):
        if self._thread is None and Path("/proc/self/smaps_rollup").exists():
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def sample(self):
        notebook = self.notebook
        if notebook and self._thread is not None:
            parents, total, frontier = _children(), 0, [os.getpid()]
            while frontier:
                pid = frontier.pop()
                kids = [p for p, parent in parents.items() if parent == pid]
                total += sum(_pss(k) for k in kids)
                frontier += kids
            self.peaks[notebook] = max(self.peaks.get(notebook, 0), total)

    def _run(self):
        while True:
            self.sample()
            time.sleep(0.25)


MEMORY = KernelMemory()


def _torch_cell(cell) -> bool:
    return "torch" in cell.get("metadata", {}).get("tags", [])


class RunAgain(pytest.Item):
    """Every code cell of the notebook once more, last first, in the kernel nbval ran it in."""

    def __init__(self, *, cells, **kwargs):
        super().__init__(**kwargs)
        self.cells = cells  # nbval's cell items, in notebook order
        self.add_marker(pytest.mark.slow)

    def runtest(self):
        kernel = self.parent.kernel
        if kernel is None or not kernel.is_alive():
            raise AssertionError(f"{self.path.name}: no kernel to run the cells again in (its first run failed?)")
        timeout = self.config.option.nbval_cell_timeout
        for item in reversed(self.cells):
            if item.options.get("skip") or (TORCH_MISSING and _torch_cell(item.cell)):
                continue
            msg_id = kernel.execute_cell_input(item.cell.source, allow_stdin=False)
            while True:
                reply = kernel.get_message(stream="shell", timeout=timeout)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            kernel.await_idle(msg_id, timeout)
            content = reply["content"]
            if content["status"] == "error":
                trace = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(content.get("traceback", [])))
                index = next(i for i, cell in enumerate(self.parent.nb.cells) if cell is item.cell)
                pytest.fail(f"{self.path.name}, cell {index} ({item.cell.get('id')}), run again after the whole "
                            f"notebook and the cells below it:\n{item.cell.source[:300]}\n{trace[-1500:]}", pytrace=False)

    def reportinfo(self):
        return self.path, None, self.name


def pytest_collection_modifyitems(items):
    cells = {}
    for item in items:
        cell = getattr(item, "cell", None)
        if cell is not None:
            cells.setdefault(item.parent, []).append(item)
            if TORCH_MISSING and _torch_cell(cell):
                item.add_marker(pytest.mark.skip(reason="PyTorch is not installed: torch cross-check cell skipped"))
    for notebook, its_cells in cells.items():
        its_cells[-1].haaw_last_cell = True
        again = RunAgain.from_parent(notebook, name="every cell again, last first", cells=its_cells)
        items.insert(items.index(its_cells[-1]) + 1, again)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if getattr(item, "cell", None) is not None:
        MEMORY.notebook = item.path.name
        MEMORY.start()
    result = yield
    MEMORY.sample()  # after every cell too: a short notebook may finish between two samples
    if getattr(item, "haaw_last_cell", False):
        peak = MEMORY.peaks.get(item.path.name, 0)
        MEMORY.notebook = None
        if peak > MEMORY_LIMIT and torch_build() != "gpu":
            raise AssertionError(f"{item.path.name}: the kernel and its processes reached {peak / 2**20:.0f} MiB "
                                 f"while the notebook ran, over the {MEMORY_LIMIT / 2**20:.0f} MiB a Binder session "
                                 "is guaranteed")
    return result


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: hand the peaks to the controller
        session.config.workeroutput["haaw_memory_peaks"] = {name: int(peak) for name, peak in MEMORY.peaks.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    MEMORY.peaks.update(getattr(node, "workeroutput", {}).get("haaw_memory_peaks", {}))


def pytest_terminal_summary(terminalreporter):
    if MEMORY.peaks:
        terminalreporter.write_line("notebook memory (kernel and its processes, peak while it ran): " + ", ".join(
            f"{name[:2]}{'+' if '_deeper' in name else ''} {peak / 2**20:.0f} MiB"  # 05+: 05's companion
            for name, peak in sorted(MEMORY.peaks.items())))
        if torch_build() == "gpu":
            terminalreporter.write_line("notebook memory: " + GPU_TORCH_NOTE)
