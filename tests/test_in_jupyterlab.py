"""Every notebook as a learner meets it: in JupyterLab, in a real (headless) browser.

nbval runs cells in a bare kernel; it cannot see a widget that fails to render, a slider
whose callback raises, or a figure that never appears. This test serves a temporary copy of
the notebooks with JupyterLab on loopback, opens each one in Chromium, runs all cells, and
checks what is on the screen: no error output, no "Error displaying widget", and every
explorer reacts when its first slider is moved with the keyboard. Screenshots go to
``$HAAW_SCREENSHOTS`` (default: a temporary folder).

It needs Debian's ``chromium`` and the ``playwright`` package (never ``playwright install``);
without them it skips, except in CI (``CI`` set), where a skip would hide a missing install.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHROMIUM = os.environ.get("HAAW_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Lab settings for the test only: no news prompt, every cell in the DOM (no windowing).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
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
    "ax.plot([0, 1]); plt.show()"]}],
    "metadata": BROKEN["metadata"], "nbformat": 4, "nbformat_minor": 5}


def _missing() -> str | None:
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
    served = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", served / "notebooks",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (served / "broken.ipynb").write_text(json.dumps(BROKEN))
    (served / "see-through.ipynb").write_text(json.dumps(SEE_THROUGH))
    home = served / ".home"  # nothing is written into the real $HOME
    env = dict(os.environ, HOME=str(home))
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                "MPLCONFIGDIR", "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[var] = str(home / var.lower())
    for name, settings in LAB_SETTINGS.items():
        path = Path(env["JUPYTERLAB_SETTINGS_DIR"]) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
               "--LabApp.news_url=None", "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(served / "server.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (served / "server.log").read_text()[-2000:])
                time.sleep(0.2)
        yield {"base": base, "token": token, "root": served, "home": home}
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
    folder = Path(os.environ.get("HAAW_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


PARALLEL = int(os.environ.get("HAAW_BROWSER_PARALLEL", "3"))  # notebooks open at once, each with its kernel
ALL_RUN_JS = """() => {
    const prompts = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
    return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent)); }"""
CELLS_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')]
    .map((cell, i) => [i,
        [...cell.querySelectorAll('.jp-OutputArea [data-mime-type="application/vnd.jupyter.stderr"]')]
            .map(e => e.innerText),
        cell.innerText.includes('Error displaying widget'),
        cell.querySelector('.jp-OutputArea .noUi-handle') !== null])"""
# Figures that would vanish in a dark theme: a picture whose corner is transparent, or a drawing with no
# background of its own (dark text on the dark page). Returns a description of each.
SEE_THROUGH_JS = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const found = [];
    panel.querySelectorAll('.jp-OutputArea-output img').forEach((img, i) => {
        if (!img.naturalWidth) return;
        const canvas = document.createElement('canvas');
        canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
        const g = canvas.getContext('2d'); g.drawImage(img, 0, 0);
        if (g.getImageData(0, 0, 1, 1).data[3] < 255) found.push('picture ' + i + ' has a transparent background');
    });
    panel.querySelectorAll('.jp-OutputArea-output svg:not([data-icon])').forEach((svg, i) => {
        const style = getComputedStyle(svg).backgroundColor;
        const own = style && style !== 'rgba(0, 0, 0, 0)' && style !== 'transparent';
        const rect = svg.querySelector(':scope > rect');
        const covered = rect && !['none', 'transparent'].includes(rect.getAttribute('fill'))
            && Number(rect.getAttribute('width')) >= 0.99 * svg.viewBox.baseVal.width;
        if (!own && !covered) found.push('drawing ' + i + ' has no background');
    });
    return found; }"""


def open_page(context, lab, relpath: str):
    """Open ``relpath`` in JupyterLab (its kernel starting); returns the page."""
    page = context.new_page()
    # ?reset: a fresh workspace, so no other notebook is restored beside this one
    page.goto(f"{lab['base']}/lab/tree/{relpath}?reset&token={lab['token']}", wait_until="commit")
    return page


def open_and_run(context, lab, relpath: str, page=None):
    """Open ``relpath`` in JupyterLab (unless ``page`` has it open already) and start running all its
    cells; returns the page."""
    page = page or open_page(context, lab, relpath)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)  # an earlier "run all" is dropped
    if page.evaluate("() => document.body.dataset.jpThemeLight") == "false":  # an earlier page chose dark
        page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'true'", timeout=30_000)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    return page


def inspect(page, name: str, shots: Path | None = None) -> list[str]:
    """Once every cell has run: the errors shown, every explorer tried, the exercise typed into."""
    page.wait_for_function(ALL_RUN_JS, timeout=180_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)
    problems = []
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
    # every cell read in one round trip: its error outputs, a widget that failed, whether it has a slider
    for index, errors, widget_failed, has_slider in page.evaluate(CELLS_JS):
        where = f"{name}, cell {index}"
        problems += [f"{where}: error output: {text[:500]}" for text in errors]
        if widget_failed:
            problems.append(f"{where}: Error displaying widget")
        if has_slider:
            cell = cells.nth(index)
            problems += _move_first_slider(page, cell, cell.locator(".jp-OutputArea .noUi-handle").first, where)
            if shots:
                cell.screenshot(path=str(shots / f"{Path(name).stem}-cell{index:02d}.png"))
    if name == TYPED_EXERCISE["notebook"]:
        problems += exercise_round_trip(page, cells, name)
    if shots:
        page.screenshot(path=str(shots / f"{Path(name).stem}.png"))
    return problems


def in_dark_theme(page, name: str, shots: Path | None = None) -> list[str]:
    """Switch JupyterLab to its dark theme; every figure must keep its own light background."""
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.wait_for_timeout(300)
    if shots:
        page.screenshot(path=str(shots / f"{Path(name).stem}-dark.png"), full_page=True)
    return [f"{name}, dark theme: {problem}" for problem in page.evaluate(SEE_THROUGH_JS)]


def run_in_lab(context, lab, relpath: str, shots: Path | None = None) -> list[str]:
    """One notebook, start to finish: the problems seen."""
    page = open_and_run(context, lab, relpath)
    try:
        return inspect(page, Path(relpath).name, shots)
    finally:
        page.close()


@pytest.fixture(scope="module")
def notebook_runs(lab, browser, screenshots, request):
    """Every notebook, a few at a time, in one browser on one server: name -> (problems, seconds)."""
    results, start = {}, time.monotonic()
    for batch in (NOTEBOOKS[i:i + PARALLEL] for i in range(0, len(NOTEBOOKS), PARALLEL)):
        opened, began = {}, time.monotonic()
        # the pages load side by side, then each runs all its cells; their kernels run side by side
        pages = {path.name: open_page(browser, lab, f"notebooks/{path.name}") for path in batch}
        for path in batch:
            try:
                opened[path.name] = (open_and_run(browser, lab, f"notebooks/{path.name}", pages[path.name]), began)
            except Exception as err:  # noqa: BLE001  (reported per notebook, not for the whole batch)
                pages[path.name].close()
                results[path.name] = ([f"{path.name}: could not open and run it: {err}"], time.monotonic() - began)
        for name, (page, began) in opened.items():
            try:
                problems = inspect(page, name, screenshots)
                problems += in_dark_theme(page, name, screenshots)
            except Exception as err:  # noqa: BLE001
                problems = [f"{name}: {type(err).__name__}: {err}"]
            finally:
                page.close()
            results[name] = (problems, time.monotonic() - began)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter and capture:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"browser test: {len(results)} notebooks in {time.monotonic() - start:.0f} s, "
                                f"{PARALLEL} at a time; screenshots in {screenshots}")
            reporter.write_line("  seconds from opening to done: " + ", ".join(
                f"{name[:2]} {seconds:.0f}" for name, (_, seconds) in sorted(results.items())))
    return results


def type_into_cell(page, cell, source: str) -> str:
    """Replace a code cell's text the way a learner would (select all, type), run it, return its output."""
    before = cell.locator(".jp-InputPrompt").inner_text()
    editor = cell.locator(".cm-content")
    editor.scroll_into_view_if_needed()
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(source)  # typed text, without the editor's auto-indent and auto-brackets
    page.keyboard.press("Shift+Enter")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        prompt = cell.locator(".jp-InputPrompt").inner_text()
        if prompt != before and "*" not in prompt:
            return cell.locator(".jp-OutputArea").inner_text()
        page.wait_for_timeout(100)
    raise AssertionError(f"the typed cell did not finish running (prompt {prompt!r})")


def exercise_round_trip(page, cells, name: str) -> list[str]:
    """In notebook ``name``, type a wrong answer into the code exercise, then a right one."""
    index = next((i for i in range(cells.count()) if f'check("{TYPED_EXERCISE["key"]}"' in cells.nth(i).inner_text()),
                 None)
    if index is None:
        return [f"{name}: no cell checks {TYPED_EXERCISE['key']}"]
    cell, problems = cells.nth(index), []
    shown = type_into_cell(page, cell, TYPED_EXERCISE["wrong"])
    if TYPED_EXERCISE["named"] not in shown:
        problems.append(f"{name}, cell {index}: a typed mistake was not named; the cell shows {shown[:300]!r}")
    shown = type_into_cell(page, cell, TYPED_EXERCISE["right"])
    if TYPED_EXERCISE["accepted"] not in shown:
        problems.append(f"{name}, cell {index}: a typed right answer was not accepted; the cell shows {shown[:300]!r}")
    return problems


def _move_first_slider(page, cell, handle, where) -> list[str]:
    handle.scroll_into_view_if_needed()
    before = cell.evaluate(EXPLORER_VIEW_JS)
    handle.focus()
    for keys in (["ArrowRight"] * 3, ["ArrowLeft"] * 6):  # left too, in case it starts at its maximum
        for key in keys:
            page.keyboard.press(key)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            now = cell.evaluate(EXPLORER_VIEW_JS)
            if now != before:
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


def test_a_figure_without_a_background_is_seen_in_the_dark_theme(lab, browser):
    page = open_and_run(browser, lab, "see-through.ipynb")
    try:
        page.wait_for_function(ALL_RUN_JS, timeout=60_000)
        problems = in_dark_theme(page, "see-through.ipynb")
    finally:
        page.close()
    assert sorted(problems) == ["see-through.ipynb, dark theme: drawing 0 has no background",
                                "see-through.ipynb, dark theme: picture 0 has a transparent background"]


def test_a_broken_explorer_callback_is_reported_with_notebook_and_cell(lab, browser):
    problems = run_in_lab(browser, lab, "broken.ipynb")
    assert problems and all(p.startswith("broken.ipynb, cell 0:") for p in problems)
    assert any("did not change" in p for p in problems)
