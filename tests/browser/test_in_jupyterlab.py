"""Every notebook as a learner meets it: in JupyterLab, in a real (headless) browser.

nbval runs cells in a bare kernel; it cannot see a widget that fails to render, a slider
whose callback raises, or a figure that never appears. This test serves the student edition of
the notebooks (solutions off, and no stored output at all) with JupyterLab on loopback, as if
PyTorch were not installed, opens them as tabs of one JupyterLab page in Chromium, in the dark
theme, a few running at a time, and as each one finishes checks what is on the screen: no error
output, no "Error displaying widget", every PyTorch cross-check saying it was skipped, every
exercise saying it was not attempted, a solution refused, every explorer reacting when its first
slider is moved with the keyboard, and every figure keeping its own background (dark text on a
see-through figure would vanish). Then it closes the tab and its kernel. Each notebook's
dark-theme screenshot goes to ``$HAAW_SCREENSHOTS`` (default: a temporary folder); with that
variable set, so do screenshots of its light view and of every explorer once moved.

It needs JupyterLab and nbformat (the course extra), Debian's ``chromium`` and the ``playwright`` package
(never ``playwright install``); without them it skips, except in CI (``CI`` set), where a skip would hide
a missing install.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.util import find_spec
from pathlib import Path

import pytest

from haaw.course.editions import EXERCISE, course_notebooks, student_notebook
from haaw.tools.crosscheck import SKIP_NOTE

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = course_notebooks(ROOT / "notebooks")
CHROMIUM = os.environ.get("HAAW_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Lab settings for the test only: no news prompt. Notebooks keep JupyterLab's default windowing, in which
# every cell is in the page but the browser skips drawing those out of view (so they are read by textContent).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}
# nbgrader's server extensions: installed with the maintainers' requirements for grading, not in a learner's lab
NBGRADER = ("formgrader", "validate_assignment", "assignment_list", "course_list")
# What an explorer shows, minus the sliders' own readouts: text, pictures, drawings.
EXPLORER_VIEW_JS = """cell => [...cell.querySelectorAll(
    '.jp-OutputArea .widget-html-content, .jp-OutputArea pre, .jp-OutputArea img, .jp-OutputArea svg')]
    .filter(n => !n.closest('.widget-slider'))
    .map(n => n.tagName === 'IMG' ? n.src : n.tagName.toLowerCase() === 'svg' ? n.outerHTML : n.textContent)
    .join('\\n')"""
# A notebook whose explorer is broken on purpose: the test of the test.
BROKEN = {"cells": [{"cell_type": "code", "execution_count": None, "id": "broken", "metadata": {},
                     "outputs": [], "source": [
    "import ipywidgets as widgets\n",
    "slider, shown = widgets.IntSlider(description='n'), widgets.HTML('n = 0')\n",
    "def redraw(change):\n",
    "    raise RuntimeError('this callback is broken on purpose')\n",
    "slider.observe(redraw, names='value')\n",
    "widgets.VBox([slider, shown])"]}],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}


# The code exercise a learner types into, in JupyterLab: a wrong ReLU backward, then a right one.
TYPED_EXERCISE = {
    "notebook": "04_gradient_flow.ipynb",
    "key": "04-relu-backward",
    "wrong": "def relu_backward(y, G):\n    return G * (y >= 0)\n\ncheck(\"04-relu-backward\", relu_backward)",
    "named": "This looks like y >= 0 as the mask",
    "right": "def relu_backward(y, G):\n    return G * (y > 0)\n\ncheck(\"04-relu-backward\", relu_backward)",
    "accepted": "✓ Correct: relu_backward passed all",
}


# A notebook whose figures would vanish in a dark theme: the test of the dark-theme check.
SEE_THROUGH = {"cells": [{"cell_type": "code", "execution_count": None, "id": "see-through", "metadata": {},
                          "outputs": [], "source": [
    "from IPython.display import HTML, display\n",
    "import matplotlib.pyplot as plt\n",
    "display(HTML('<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"80\" height=\"20\" viewBox=\"0 0 80 20\">'\n",
    "            '<text x=\"2\" y=\"15\">no background</text></svg>'))\n",
    "fig, ax = plt.subplots(figsize=(2, 1), facecolor='none')\n",
    "ax.plot([0, 1]); plt.show()"]},
    # a figure shown the course's way: it has its background and its alt text, so nothing is said of it
    {"cell_type": "code", "execution_count": None, "id": "described", "metadata": {}, "outputs": [], "source": [
        "from haaw.course.style import show_figure\n",
        "fig, ax = plt.subplots(figsize=(2, 1))\n",
        "ax.plot([0, 1])\n",
        "show_figure('a straight line rising from the bottom left corner to the top right one.', fig)"]}],
    "metadata": BROKEN["metadata"], "nbformat": 4, "nbformat_minor": 5}


# The last cell of every served notebook: it asks for an exercise's solution, which the student edition refuses.
SOLUTION_PROBE = "print(solution({key!r}))"
EXERCISE_KEY = re.compile(EXERCISE.pattern + r"([^\"']+)")  # check("key", ...): the key


def first_exercise(nb) -> str:
    """The key of the notebook's first exercise."""
    return next(match.group(1) for match in (EXERCISE_KEY.search(c.source) for c in nb.cells
                                             if c.cell_type == "code") if match)


def _missing() -> str | None:
    for package in ("nbformat", "jupyterlab"):  # the course extra
        if find_spec(package) is None:
            return f"the {package} package is not installed (pip install {package})"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install playwright)"
    if not CHROMIUM:
        return "Chromium is not installed (Debian: apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a free loopback port, serving a throwaway copy of the notebooks."""
    missing = _missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"browser test cannot run in CI: {missing}; .ci/run should have installed it")
    if missing:
        pytest.skip(f"browser test skipped: {missing}")
    import nbformat

    served = tmp_path_factory.mktemp("lab")
    (served / "notebooks").mkdir()
    for path in NOTEBOOKS:  # the student edition, without any stored output: all that is seen comes from this run
        nb = student_notebook(nbformat.read(path, as_version=4))
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        if not path.name.startswith("00"):  # the setup check has no exercise to ask a solution for
            nb.cells.append(nbformat.v4.new_code_cell(SOLUTION_PROBE.format(key=first_exercise(nb))))
        target = served / path.relative_to(ROOT)  # notebooks/NN_name.ipynb, or notebooks/deeper/NN_name_deeper.ipynb
        target.parent.mkdir(exist_ok=True)
        nbformat.write(nb, target)
    (served / "broken.ipynb").write_text(json.dumps(BROKEN))
    (served / "see-through.ipynb").write_text(json.dumps(SEE_THROUGH))
    home = served / ".home"  # nothing is written into the real $HOME
    # Torch counts as absent in the kernels (each torch cell prints its skip note): this is the course's run
    # without PyTorch. With it, the cross-checks only print text that nbval already checks cell by cell, and
    # importing torch in every kernel took a third of this test's time.
    env = dict(os.environ, HOME=str(home), HAAW_NO_TORCH="1")
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                "MPLCONFIGDIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[var] = str(home / var.lower())
    page_config = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig" / "page_config.json"  # and nbgrader's menus
    page_config.parent.mkdir(parents=True, exist_ok=True)
    page_config.write_text(json.dumps({"disabledExtensions": {"@jupyter/nbgrader": True}}))
    for name, settings in LAB_SETTINGS.items():
        path = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    # `python -m jupyterlab`, with the package rfc3987_syntax counted as missing, as in every pytest process
    # here (tests/plugins/haaw_fast_start.py): it is an optional IRI checker of jsonschema that builds a parser
    # as it is imported, and the server is ready in about 1.3 s instead of 2.4
    launch = "import sys; sys.modules['rfc3987_syntax'] = None; from jupyterlab.labapp import main; sys.exit(main())"
    command = [sys.executable, "-c", launch, "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
               "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True",
               # server extensions no notebook uses (language servers, terminals, the classic notebook's
               # shim): without them the server starts in about 2 s instead of 3.5; and nbgrader's, which the
               # maintainers' install has for grading (requirements-no-torch.txt) and the learners' image has not;
               # a Python literal, as traitlets reads it
               '--ServerApp.jpserver_extensions={"jupyter_lsp": False, "jupyter_server_terminals": False, '
               '"notebook_shim": False, ' + ", ".join(f'"nbgrader.server_extensions.{n}": False' for n in NBGRADER) + '}']
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(served / "server.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def ready():
        """Wait until the server answers (the browser starts meanwhile)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                return
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (served / "server.log").read_text()[-2000:])
                time.sleep(0.1)

    try:
        yield {"base": base, "token": token, "root": served, "home": home, "ready": ready}
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the kernels it started
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def browser(lab):
    from playwright.sync_api import sync_playwright

    home = str(lab["home"])
    # the playwright driver and Chromium write caches and logs under $HOME: give them the throwaway one
    with pytest.MonkeyPatch.context() as patch:
        for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            patch.setenv(var, home)
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(
                str(lab["root"] / ".chromium-profile"), executable_path=CHROMIUM, headless=True,
                args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 900})
            try:
                yield context
            finally:
                context.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory):
    """Where the screenshots go, and whether to take the light ones too (they cost about 7 s)."""
    folder = Path(os.environ.get("HAAW_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder, bool(os.environ.get("HAAW_SCREENSHOTS"))


PARALLEL = int(os.environ.get("HAAW_BROWSER_PARALLEL", "4"))  # notebooks running at once, each in its kernel
# The page's JupyterLab, driven through its own commands: open a notebook as a tab (its kernel starting),
# run all its cells, and read how far it got. Each run is kept by its path in window.haawRuns.
OPEN_AND_RUN_JS = """path => {
    const run = {id: null, panel: null, sent: false, error: null};
    (window.haawRuns = window.haawRuns || {})[path] = run;
    (async () => {
        const app = window.jupyterapp;
        await app.restored;
        // opened behind the tab being inspected, which must stay in view
        run.panel = await app.commands.execute('docmanager:open',
                                               {path, factory: 'Notebook', options: {activate: false}});
        run.id = run.panel.id;
        await run.panel.context.ready;
        await run.panel.sessionContext.ready;
        while (run.panel.sessionContext.session?.kernel?.status !== 'idle') {
            // a run-all sent before the kernel is idle is dropped
            await new Promise(resolve => setTimeout(resolve, 100));
        }
        app.commands.execute('notebook:run-all-cells', {widgetId: run.id, activate: false});
        run.sent = true;
    })().catch(err => { run.error = String(err); });
    }"""
STATES_JS = """paths => paths.map(path => {
    const run = window.haawRuns[path];
    if (!run.sent) return {id: run.id, sent: false, error: run.error};
    const cells = run.panel.content.widgets.filter(cell => cell.model.type === 'code');
    const outputs = cells.flatMap(cell => Array.from({length: cell.model.outputs.length},
                                                     (_, i) => cell.model.outputs.get(i)));
    return {id: run.id, sent: true, error: run.error, total: cells.length,
            ran: cells.filter(cell => cell.model.executionCount !== null).length,
            failed: outputs.some(output => output.type === 'error'),
            idle: run.panel.sessionContext.session?.kernel?.status === 'idle'}; })"""
ACTIVATE_JS = """async id => {
    window.jupyterapp.shell.activateById(id);
    const node = document.getElementById(id);
    for (let i = 0; i < 100 && node.classList.contains('lm-mod-hidden'); i++) {
        await new Promise(resolve => setTimeout(resolve, 50));
    }
    // every widget an output holds has been drawn, or has failed to be
    const views = [...node.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.widget-view+json"]')];
    const drawn = v => v.querySelector('.jupyter-widgets') || v.textContent.includes('Error displaying widget');
    for (let i = 0; i < 300 && !views.every(drawn); i++) {
        await new Promise(resolve => setTimeout(resolve, 100));
    }
    }"""
CLOSE_JS = """path => {
    const run = window.haawRuns[path];
    if (!run.panel) return;  // it never opened
    // its kernel stopped (its memory given back), then the tab closed without asking to save (the served copy
    // is thrown away); the test goes on meanwhile. Closing the tab first would leave the kernel running.
    run.panel.sessionContext.shutdown().catch(() => {}).finally(() => run.panel.dispose());
    }"""
# Every code cell as the notebook's model holds it: its source, its tags, the text its outputs printed.
CODE_CELLS_JS = """path => window.haawRuns[path].panel.content.widgets
    .filter(cell => cell.model.type === 'code')
    .map(cell => ({source: cell.model.sharedModel.getSource(), tags: cell.model.getMetadata('tags') || [],
                   printed: cell.model.outputs.toJSON().map(output =>
                       [].concat(output.text || [], (output.data || {})['text/plain'] || []).join('')).join('')}))"""
CELLS_JS = """id => [...document.getElementById(id).querySelectorAll('.jp-Notebook .jp-Cell')]
    .map((cell, i) => [i,
        [...cell.querySelectorAll('.jp-OutputArea [data-mime-type="application/vnd.jupyter.stderr"]')]
            .map(e => e.textContent),
        cell.textContent.includes('Error displaying widget'),
        cell.querySelector('.jp-OutputArea .noUi-handle') !== null,
        cell.querySelector('.jp-OutputArea .jupyter-widgets') !== null])"""
# Figures that would vanish in a dark theme: a picture whose corner is transparent, or a drawing with no
# background of its own (dark text on the dark page). Returns a description of each.
SEE_THROUGH_JS = """async id => {
    const panel = document.getElementById(id);
    const found = [];
    for (const [i, shown] of [...panel.querySelectorAll('.jp-OutputArea-output img')].entries()) {
        const img = new Image();  // the picture decoded afresh from its source: one being redrawn reads as empty
        img.src = shown.src;
        if (!await img.decode().then(() => true, () => false) || !img.naturalWidth) continue;
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const g = canvas.getContext('2d'); g.drawImage(img, 0, 0);
        if (g.getImageData(0, 0, 1, 1).data[3] < 255) found.push('picture ' + i + ' has a transparent background');
    }
    panel.querySelectorAll('.jp-OutputArea-output svg:not([data-icon])').forEach((svg, i) => {
        const style = getComputedStyle(svg).backgroundColor;
        const own = style && style !== 'rgba(0, 0, 0, 0)' && style !== 'transparent';
        const rect = svg.querySelector(':scope > rect');
        const covered = rect && !['none', 'transparent'].includes(rect.getAttribute('fill'))
            && Number(rect.getAttribute('width')) >= 0.99 * svg.viewBox.baseVal.width;
        if (!own && !covered) found.push('drawing ' + i + ' has no background');
    });
    return found; }"""
# Every picture in the outputs with its alt text, and every drawing shown inline (not an icon) with its name:
# what a screen reader says for a figure.
ALT_JS = """id => {
    const panel = document.getElementById(id);
    const cellOf = node => [...panel.querySelectorAll('.jp-Notebook .jp-Cell')].indexOf(node.closest('.jp-Cell'));
    return [...[...panel.querySelectorAll('.jp-OutputArea-output img')].map(img =>
                [cellOf(img), 'picture', img.getAttribute('alt')]),
            ...[...panel.querySelectorAll('.jp-OutputArea-output svg:not([data-icon])')]
                .filter(svg => !svg.closest('.jp-OutputArea-output img, mjx-container, .widget-slider'))
                .map(svg => [cellOf(svg), 'drawing', svg.getAttribute('aria-label')
                             || (svg.querySelector(':scope > title') || {}).textContent || null])]; }"""
PATH_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|gif|svg|webp)$|^data:", re.IGNORECASE)


def figures_without_alt(running: Running) -> list[str]:
    """Every figure a notebook shows in JupyterLab has alt text that describes it: not empty, not a file name,
    a sentence (``show_figure`` and a drawn graph's HTML form give it their description)."""
    problems = []
    for index, kind, alt in running.page.evaluate(ALT_JS, running.id):
        alt = (alt or "").strip()
        if not alt or PATH_LIKE.search(alt) or len(alt.split()) < 5:
            problems.append(f"{running.name}, cell {index}: a {kind} without alt text that describes it: {alt!r}")
    return problems


THEME_JS = """async theme => {
    const light = theme === 'JupyterLab Light' ? 'true' : 'false';
    if (document.body.dataset.jpThemeLight === light) return false;
    await window.jupyterapp.commands.execute('apputils:change-theme', {theme});
    for (let i = 0; i < 300 && document.body.dataset.jpThemeLight !== light; i++) {
        await new Promise(resolve => setTimeout(resolve, 100));
    }
    return true; }"""


@pytest.fixture(scope="module")
def app(lab, browser):
    """One JupyterLab page: every notebook is opened in it as a tab, as a learner opens several."""
    lab["ready"]()
    page = browser.new_page()
    # ?reset: a fresh workspace, so no notebook of an earlier session is restored
    page.goto(f"{lab['base']}/lab?reset&token={lab['token']}", wait_until="commit")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=90_000)
    page.evaluate("async () => { await window.jupyterapp.restored; }")
    # The notebooks run in the dark theme, where the figures are checked; switched once, before any tab is open
    # (a change of theme restyles every open tab). Only the optional light screenshots switch back, and forth.
    page.evaluate(THEME_JS, "JupyterLab Dark")
    yield page
    page.close()


def states(runs: list) -> list[dict]:
    """How far each of ``runs`` has got, read in one round trip."""
    found = runs[0].page.evaluate(STATES_JS, [r.path for r in runs]) if runs else []
    for run, state in zip(runs, found):
        run.id = state["id"]
    return found


def _finished(state: dict) -> bool:
    """It could not be opened, or every cell has run (or one failed, and the rest will not) and the kernel is
    idle."""
    return bool(state["error"]) or (state["sent"] and state["idle"]
                                    and (state["ran"] == state["total"] or state["failed"]))


class Running:
    """A notebook being opened in the app page, then its cells running; nothing here waits for it."""

    def __init__(self, page, relpath: str):
        self.page, self.path, self.name, self.began = page, relpath, Path(relpath).name, time.monotonic()
        self.id = None
        page.evaluate(OPEN_AND_RUN_JS, relpath)

    def state(self) -> dict:
        return states([self])[0]

    def activate(self) -> None:
        self.page.evaluate(ACTIVATE_JS, self.id)

    def close(self) -> None:
        self.page.evaluate(CLOSE_JS, self.path)


def inspect(running: Running, shots: Path | None = None, patience: float = 5) -> list[str]:
    """Once every cell has run: the errors shown, every explorer tried (given ``patience`` seconds to react to
    a move), the exercise typed into."""
    page, name, problems, state = running.page, running.name, [], running.state()
    if state["error"]:
        return [f"{name}: JupyterLab could not open and run it: {state['error']}"]
    if not state["sent"]:
        return [f"{name}: its kernel was not ready to run the cells within 180 s"]
    if shots:
        page.evaluate(THEME_JS, "JupyterLab Light")
    running.activate()
    if state["ran"] < state["total"]:
        problems.append(f"{name}: only {state['ran']} of its {state['total']} code cells ran")
    if running.path.startswith("notebooks/"):  # before a cell is typed into
        problems += student_edition_problems(name, page.evaluate(CODE_CELLS_JS, running.path))
    cells = page.locator(f'[id="{running.id}"] .jp-Notebook .jp-Cell')
    # every cell read in one round trip: its error outputs, a widget that failed, whether it has a slider
    for index, errors, widget_failed, has_slider, has_widget in page.evaluate(CELLS_JS, running.id):
        where = f"{name}, cell {index}"
        problems += [f"{where}: error output: {text[:500]}" for text in errors]
        if widget_failed:
            problems.append(f"{where}: Error displaying widget")
        if has_widget:
            problems += unnamed_controls(cells.nth(index), where)
        if has_slider:
            cell = cells.nth(index)
            problems += _move_first_slider(page, cell, cell.locator(".jp-OutputArea .noUi-handle").first, where,
                                           patience, settle=shots is not None)
            if shots:
                cell.screenshot(path=str(shots / f"{Path(name).stem}-cell{index:02d}.png"))
    problems += figures_without_alt(running)
    if name == TYPED_EXERCISE["notebook"]:
        problems += exercise_round_trip(page, cells, name)
    if shots:
        page.screenshot(path=str(shots / f"{Path(name).stem}.png"))
    return problems


CONTROL = re.compile(r'^\s*- (slider|spinbutton|checkbox|combobox|textbox|button)(?: "([^"]*)")?')


def unnamed_controls(cell, where: str) -> list[str]:
    """What a screen reader meets in an explorer, read from the accessibility tree Chromium builds (Playwright's
    ARIA snapshot): every slider, box, switch and button has a name. ipywidgets leaves a slider's handle
    nameless; the explorer's script names it after the number box or drop-down beside it, which holds the same
    value (``haaw.course.explorers.NAME_HANDLES_JS``)."""
    # the script names the handles once the widgets are drawn: up to ten seconds (two were too few on a loaded
    # 2-core machine, where 09's slider was once read before its script had run)
    for _ in range(100):
        found = [CONTROL.match(line) for line in cell.locator(".jp-OutputArea").first.aria_snapshot().splitlines()]
        found = [(m.group(1), m.group(2)) for m in found if m]
        if all(name for _, name in found):
            break
        time.sleep(0.1)
    problems = [f"{where}: a {role} without an accessible name" for role, name in found if not name]
    sliders = sum(role == "slider" for role, _ in found)
    boxes = sum(role in ("spinbutton", "combobox") and bool(name) for role, name in found)
    if boxes < sliders:
        problems.append(f"{where}: {sliders} slider(s) but {boxes} named box(es) beside them")
    return problems


def _pair_has_torch_cells(name: str) -> bool:
    """Does the core or the companion of notebook ``name`` hold a cell tagged torch? A core may leave its PyTorch
    cross-checks to its companion, one link away."""
    import nbformat

    number = name[:2]
    pair = [p for p in NOTEBOOKS if p.name[:2] == number]
    return any("torch" in c.metadata.get("tags", []) for p in pair
               for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")


def student_edition_problems(name: str, cells: list[dict]) -> list[str]:
    """The student edition, run where torch counts as absent: every PyTorch cross-check prints the skip note,
    every exercise says it was not attempted, and the solution the last cell asks for is refused."""
    problems = []
    torch_cells = [c for c in cells if "torch" in c["tags"]]
    if not torch_cells and not _pair_has_torch_cells(name):
        problems.append(f"{name}: no cell of it or of its core or companion is tagged torch; the PyTorch "
                        "cross-checks were not found")
    problems += [f"{name}: a torch cell printed {c['printed'][:300]!r}, not the note that PyTorch is skipped"
                 for c in torch_cells if not c["printed"].strip().endswith(SKIP_NOTE)]  # a line on the learner's code may come first
    exercises = [c for c in cells[:-1] if EXERCISE.search(c["source"])]
    problems += [f"{name}: an exercise shows {c['printed'][:300]!r}, not \"Not attempted yet\"; its cell: "
                 f"{c['source'][:200]!r}" for c in exercises if "Not attempted yet" not in c["printed"]]
    if name.startswith("00"):  # the setup check has no exercise and asks for no solution
        return problems
    if not cells or "Solutions are switched off" not in cells[-1]["printed"]:
        shown = cells[-1]["printed"][:300] if cells else ""
        problems.append(f"{name}: the student edition gave a solution; it printed {shown!r}")
    return problems


def in_dark_theme(running: Running, shots: Path | None = None) -> list[str]:
    """In JupyterLab's dark theme, every figure must keep its own light background."""
    if running.page.evaluate(THEME_JS, "JupyterLab Dark"):  # only after light screenshots
        running.activate()
        running.page.wait_for_timeout(100)  # the new theme's colours applied to this panel
    if shots:
        running.page.screenshot(path=str(shots / f"{Path(running.name).stem}-dark.png"), full_page=True)
    return [f"{running.name}, dark theme: {problem}" for problem in running.page.evaluate(SEE_THROUGH_JS, running.id)]


@pytest.fixture(scope="module")
def notebook_runs(lab, app, screenshots, request):
    """Every notebook in the one app page, PARALLEL running at a time: the two test notebooks first (they are
    short, and the broken explorer's two seconds of waiting pass while the long notebooks run), then the course's,
    longest first. Each is inspected and seen in the dark theme as soon as it is done, while the others run on,
    then closed: name -> (problems, seconds)."""
    results, start = {}, time.monotonic()
    folder, light_shots = screenshots
    waiting = ["see-through.ipynb", "broken.ipynb"]
    waiting += [path.relative_to(ROOT).as_posix() for path in sorted(NOTEBOOKS, key=lambda path: -path.stat().st_size)]
    running = []
    while waiting or running:
        while waiting and len(running) < PARALLEL:
            running.append(Running(app, waiting.pop(0)))
        ready = [r for r, state in zip(running, states(running))
                 if _finished(state) or time.monotonic() - r.began > 180]
        for r in ready:
            running.remove(r)
            try:  # the broken explorer never reacts: no need to give it 5 s a direction
                problems = inspect(r, folder if light_shots and r.path != "broken.ipynb" else None,
                                   patience=1 if r.path == "broken.ipynb" else 5)
            except Exception as err:  # noqa: BLE001
                problems = [f"{r.name}: {type(err).__name__}: {err}"]
            try:
                problems += in_dark_theme(r, folder)
            except Exception as err:  # noqa: BLE001
                problems.append(f"{r.name}, dark theme: {type(err).__name__}: {err}")
            results[r.name] = (problems, time.monotonic() - r.began)
            r.close()  # fewer open tabs, less for the page to draw
        if not ready:
            app.wait_for_timeout(300)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter and capture:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"browser test: {len(results)} notebooks (two of them the test's own) in "
                                f"{time.monotonic() - start:.0f} s, {PARALLEL} running at a time in one page; "
                                f"screenshots in {folder}")
            reporter.write_line("  seconds from opening to inspected: " + ", ".join(
                f"{name[:2]} {seconds:.0f}" for name, (_, seconds) in sorted(results.items())))
    return results


def type_into_cell(page, cell, source: str) -> str:
    """Replace a code cell's text the way a learner would (select all, type), run it, return its output."""
    before = cell.locator(".jp-InputPrompt").inner_text()
    editor = cell.locator(".cm-content")
    editor.scroll_into_view_if_needed()
    editor.click()
    # each key pressed on the editor itself (focused first): a tab opening meanwhile cannot take the keys
    editor.press("Control+A")
    editor.focus()
    page.keyboard.insert_text(source)  # typed text, without the editor's auto-indent and auto-brackets
    editor.press("Shift+Enter")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        prompt = cell.locator(".jp-InputPrompt").inner_text()
        if prompt != before and "*" not in prompt:
            return cell.locator(".jp-OutputArea").inner_text()
        page.wait_for_timeout(100)
    raise AssertionError(f"the typed cell did not finish running (prompt {prompt!r})")


def exercise_round_trip(page, cells, name: str) -> list[str]:
    """In notebook ``name``, type a wrong answer into the code exercise, then a right one."""
    index = cells.evaluate_all("(cells, text) => cells.findIndex(cell => cell.textContent.includes(text))",
                               f'check("{TYPED_EXERCISE["key"]}"')
    if index < 0:
        return [f"{name}: no cell checks {TYPED_EXERCISE['key']}"]
    cell, problems = cells.nth(index), []
    shown = type_into_cell(page, cell, TYPED_EXERCISE["wrong"])
    if TYPED_EXERCISE["named"] not in shown:
        problems.append(f"{name}, cell {index}: a typed mistake was not named; the cell shows {shown[:300]!r}")
    shown = type_into_cell(page, cell, TYPED_EXERCISE["right"])
    if TYPED_EXERCISE["accepted"] not in shown:
        problems.append(f"{name}, cell {index}: a typed right answer was not accepted; the cell shows {shown[:300]!r}")
    return problems


def _move_first_slider(page, cell, handle, where, patience: float = 5, settle: bool = False) -> list[str]:
    handle.scroll_into_view_if_needed()
    before = cell.evaluate(EXPLORER_VIEW_JS)
    for keys in (["ArrowRight"] * 3, ["ArrowLeft"] * 6):  # left too, in case it starts at its maximum
        for key in keys:
            handle.press(key)  # focuses the handle first: a tab opening meanwhile cannot take the keys
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            now = cell.evaluate(EXPLORER_VIEW_JS)
            if now != before:
                if settle:
                    _settle(page, cell, now)  # let the last redraw land before a screenshot is taken
                return []
            page.wait_for_timeout(100)
    return [f"{where}: moving the explorer's first slider did not change what it shows"]


def _settle(page, cell, view, seconds: float = 5) -> None:
    """Wait until the explorer's view stops changing (each key press may trigger a redraw)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        page.wait_for_timeout(400)
        latest = cell.evaluate(EXPLORER_VIEW_JS)
        if latest == view:
            return
        view = latest


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_and_its_explorers_respond_in_jupyterlab(notebook, notebook_runs):
    problems, _ = notebook_runs[notebook.name]
    assert not problems, "\n".join(problems)


def test_a_figure_without_a_background_is_seen_in_the_dark_theme(notebook_runs):
    problems, _ = notebook_runs["see-through.ipynb"]
    assert sorted(p for p in problems if "dark theme" in p) == [
        "see-through.ipynb, dark theme: drawing 0 has no background",
        "see-through.ipynb, dark theme: picture 0 has a transparent background"]


def test_a_figure_without_alt_text_is_reported_and_one_shown_with_show_figure_is_not(notebook_runs):
    """plt.show() leaves the picture without alt text (JupyterLab's image renderer sets none), and an inline SVG
    without a title has no name; show_figure's picture, in the next cell, is described."""
    problems, _ = notebook_runs["see-through.ipynb"]
    assert sorted(p for p in problems if "alt text" in p) == [
        "see-through.ipynb, cell 0: a drawing without alt text that describes it: ''",
        "see-through.ipynb, cell 0: a picture without alt text that describes it: ''"]


def test_a_broken_explorer_callback_is_reported_with_notebook_and_cell(notebook_runs):
    problems, _ = notebook_runs["broken.ipynb"]
    assert problems and all(p.startswith("broken.ipynb, cell 0:") for p in problems)
    assert any("did not change" in p for p in problems)
    assert "broken.ipynb, cell 0: 1 slider(s) but 0 named box(es) beside them" in problems
