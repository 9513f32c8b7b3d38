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
def screenshots(tmp_path_factory, request):
    folder = Path(os.environ.get("HAAW_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    times = {}
    yield folder, times
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter and capture and times:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(f"browser test: screenshots in {folder}")
            for name, seconds in times.items():
                reporter.write_line(f"browser test: {name} {seconds:.1f} s (open, run all, move sliders)")


def run_in_lab(context, lab, relpath: str, shots: Path | None = None) -> list[str]:
    """Open ``relpath`` in JupyterLab, run all cells, try every explorer; return the problems seen."""
    name = Path(relpath).name
    page = context.new_page()
    problems = []
    try:
        # ?reset: a fresh workspace, so no other notebook is restored beside this one
        page.goto(f"{lab['base']}/lab/tree/{relpath}?reset&token={lab['token']}")
        idle = page.get_by_text("Python 3 (ipykernel) | Idle")
        idle.wait_for(timeout=60_000)  # an earlier "run all" is silently dropped
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function("""() => {
            const prompts = [...document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent)); }""",
                               timeout=120_000)
        idle.wait_for(timeout=60_000)
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")
        for index in range(cells.count()):
            cell = cells.nth(index)
            where = f"{name}, cell {index}"
            errors = cell.locator('.jp-OutputArea [data-mime-type="application/vnd.jupyter.stderr"]')
            for k in range(errors.count()):
                problems.append(f"{where}: error output: {errors.nth(k).inner_text()[:500]}")
            if "Error displaying widget" in cell.inner_text():
                problems.append(f"{where}: Error displaying widget")
            handles = cell.locator(".jp-OutputArea .noUi-handle")
            if handles.count():
                problems += _move_first_slider(page, cell, handles.first, where)
                if shots:
                    cell.screenshot(path=str(shots / f"{Path(name).stem}-cell{index:02d}.png"))
        if name == TYPED_EXERCISE["notebook"]:
            problems += exercise_round_trip(page, cells, name)
        if shots:
            page.screenshot(path=str(shots / f"{Path(name).stem}.png"))
    finally:
        page.close()
    return problems


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
def test_notebook_runs_and_its_explorers_respond_in_jupyterlab(notebook, lab, browser, screenshots):
    folder, times = screenshots
    start = time.monotonic()
    problems = run_in_lab(browser, lab, f"notebooks/{notebook.name}", folder)
    times[notebook.name] = time.monotonic() - start
    assert not problems, "\n".join(problems)


def test_a_broken_explorer_callback_is_reported_with_notebook_and_cell(lab, browser):
    problems = run_in_lab(browser, lab, "broken.ipynb")
    assert problems and all(p.startswith("broken.ipynb, cell 0:") for p in problems)
    assert any("did not change" in p for p in problems)
