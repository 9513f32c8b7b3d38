"""The course's website as a reader meets it: every page of the built site in headless Chromium, offline.

The site is built from the notebooks as they are (``scripts/build_site.py``, into a temporary folder; or the one
``HAAW_SITE`` names) and served on loopback. Every request that is not for that server is aborted, so a page
that reaches for a CDN, a web font or a remote picture fails here as it would for a reader without network.
Each page must load with no console error and no blocked request, every picture must have been decoded
(``naturalWidth > 0``), every formula typeset by the site's own MathJax with no ``$...$`` left raw, every link
within the site must reach a page (and the anchor it names) that exists, the light/dark switch must switch, and
the search page must find "chain rule". Two planted faults (a broken link, a CDN script) in a copy of the site
prove the checks fail.

It needs Debian's ``chromium``, the ``playwright`` package and the site's tools (docs/requirements.txt); without
them it skips, except in CI (``CI`` set), where a skip would hide a missing install.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

import pytest

from haaw.course.editions import course_notebooks

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("HAAW_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]

# What a page shows once it has loaded and MathJax has typeset it: its pictures, its formulas, its links.
PAGE_JS = """async () => {
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
    const images = [...document.images];
    await Promise.all(images.map(img => { img.loading = 'eager'; return img.decode().catch(() => null); }));
    const main = document.querySelector('main') || document.body;
    const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode: node =>
        node.parentElement.closest('pre, code, script, style, mjx-container, .highlight, .output')
            ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
    let text = '';
    while (walker.nextNode()) text += walker.currentNode.textContent + '\\n';
    return {
        images: images.map(img => ({src: img.getAttribute('src'), width: img.naturalWidth})),
        math: document.querySelectorAll('.math').length,
        typeset: [...document.querySelectorAll('.math')].filter(m => m.querySelector('mjx-container')).length,
        rawMath: (text.match(/\\$\\$[^$]+\\$\\$|\\$[^$\\s][^$\\n]*\\$/g) || []).slice(0, 3),
        links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    }; }"""
SEARCH_JS = """async () => {
    for (let i = 0; i < 200; i++) {
        const found = document.querySelectorAll('#search-results ul.search li');
        if (found.length) return [...found].map(li => li.querySelector('a').getAttribute('href'));
        await new Promise(resolve => setTimeout(resolve, 50));
    }
    return []; }"""


def _missing() -> str | None:
    for module, package in (("playwright.sync_api", "playwright (tests/browser/requirements.txt)"),
                            ("sphinx", "sphinx (docs/requirements.txt)"), ("myst_nb", "myst-nb (docs/requirements.txt)")):
        try:
            __import__(module)
        except ImportError:
            return f"{package} is not installed"
    if not CHROMIUM:
        return "Chromium is not installed (Debian: apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site: HAAW_SITE if set, or built here from the repository as it is (well under a minute)."""
    missing = _missing()
    if missing and os.environ.get("CI"):
        pytest.fail(f"site test cannot run in CI: {missing}; .ci/run should have installed it")
    if missing:
        pytest.skip(f"site test skipped: {missing}")
    if os.environ.get("HAAW_SITE"):
        return Path(os.environ["HAAW_SITE"]).resolve()
    work = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_site.py"), str(work / "html"),
                             "--stage", str(work / "stage")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, "the site did not build:\n" + result.stdout[-3000:] + result.stderr[-3000:]
    return work / "html"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def serve():
    """serve(folder) -> the base URL of a loopback server for that folder; every server is stopped at the end."""
    servers = []

    def start(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    home = str(tmp_path_factory.mktemp("chromium-home"))
    with pytest.MonkeyPatch.context() as patch:
        for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            patch.setenv(var, home)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            try:
                yield browser
            finally:
                browser.close()


def _offline_page(browser, base: str, problems: list[str]):
    """A page in a fresh context whose requests other than to ``base`` are aborted, each one a problem."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})

    def route(route):
        if route.request.url.startswith(base):
            route.continue_()
        else:
            problems.append(f"a request outside the site (blocked): {route.request.url}")
            route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console error on {page.url}: {message.text}"))
    page.on("pageerror", lambda error: problems.append(f"script error on {page.url}: {error}"))
    return context, page


def check_pages(browser, site: Path, base: str, pages: list[Path]) -> list[str]:
    """Everything wrong with these pages of ``site`` (served at ``base``): an empty list when all is well."""
    problems: list[str] = []
    context, page = _offline_page(browser, base, problems)
    targets: set[str] = set()
    try:
        for path in pages:
            name = path.relative_to(site).as_posix()
            response = page.goto(base + name, wait_until="load")
            if not response or not response.ok:
                problems.append(f"{name} did not load")
                continue
            shown = page.evaluate(PAGE_JS)
            problems += [f"{name}: picture {img['src']} is not shown" for img in shown["images"] if not img["width"]]
            if shown["typeset"] < shown["math"]:
                problems.append(f"{name}: {shown['math'] - shown['typeset']} of {shown['math']} formulas not typeset")
            problems += [f"{name}: raw math left in the text: {raw!r}" for raw in shown["rawMath"]]
            targets |= {link for link in shown["links"] if link.startswith(base)}
    finally:
        context.close()
    problems += _broken_links(site, base, targets)
    return problems


@functools.lru_cache(maxsize=None)
def _ids(path: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\bid="([^"]+)"', path.read_text(errors="replace")))


def _broken_links(site: Path, base: str, links: set[str]) -> list[str]:
    """Each link within the site must name a file of the site, and an anchor that file has."""
    broken = []
    for link in sorted(links):
        url = urllib.parse.urlsplit(link)
        path = site / urllib.parse.unquote(url.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.is_file():
            broken.append(f"broken link: {link}")
        elif url.fragment and path.suffix == ".html" and urllib.parse.unquote(url.fragment) not in _ids(path):
            broken.append(f"broken anchor: {link}")
    return broken


def all_pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if not p.relative_to(site).parts[0].startswith("_"))


def test_every_page_loads_offline_with_its_figures_math_and_links(site, serve, chromium):
    pages = all_pages(site)
    notebooks = course_notebooks(ROOT / "notebooks")
    assert {p.stem for p in notebooks} <= {p.stem for p in pages}, "a notebook has no page"
    for name in ("index", "docs/instructor-guide", "docs/pytorch", "docs/testing", "docs/performance"):
        assert site / f"{name}.html" in pages, f"{name} has no page"
    assert check_pages(chromium, site, serve(site), pages) == []


def test_every_notebook_page_has_its_launch_links_and_no_widget_left(site):
    repository = (ROOT / "binder" / "repository.txt").read_text().strip()
    for path in course_notebooks(ROOT / "notebooks"):
        inside = path.relative_to(ROOT / "notebooks")
        html = (site / "notebooks" / inside.with_suffix(".html")).read_text()
        binder = f"https://mybinder.org/v2/{repository}/HEAD?urlpath=lab/tree/notebooks/{inside.as_posix()}"
        assert binder in html.replace("&amp;", "&"), f"{path.name}: no Binder link"
        download = re.search(rf'href="((?:\.\./)+_downloads/[0-9a-f]+/{re.escape(path.name)})"', html)
        page_folder = (site / "notebooks" / inside).parent
        assert download and (page_folder / download.group(1)).is_file(), f"{path.name}: no download"
        assert "widget-view+json" not in html, f"{path.name}: an explorer's widget output is left on the page"
        if "widget-view+json" in path.read_text():
            assert "Interactive explorer" in html, f"{path.name}: an explorer without its note"


def test_the_dark_mode_switch_and_the_search_work_offline(site, serve, chromium):
    base = serve(site)
    problems: list[str] = []
    context, page = _offline_page(chromium, base, problems)
    try:
        page.goto(base + "index.html", wait_until="load")
        for mode in ("dark", "light"):  # the header's colour-mode menu
            page.locator(".theme-switch-button:visible").first.click()
            page.locator(f".theme-change-button[data-mode={mode}]:visible").first.click()
            assert page.evaluate("document.documentElement.dataset.theme") == mode
        page.goto(base + "search.html?q=chain+rule", wait_until="load")
        found = page.evaluate(SEARCH_JS)
    finally:
        context.close()
    assert any("01_chain_rule" in href for href in found), found
    assert problems == []


def test_a_planted_broken_link_and_a_planted_cdn_script_fail_the_check(site, serve, chromium, tmp_path):
    """The test of the test: a copy of the site with one fault each, and the check names it."""
    for fault, plant, expected in (
            ("broken link", '<a href="notebooks/no_such_notebook.html">gone</a>', "broken link"),
            ("broken anchor", '<a href="notebooks/01_chain_rule.html#no-such-section">gone</a>', "broken anchor"),
            ("CDN script", '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>',
             "a request outside the site")):
        copy = tmp_path / fault.replace(" ", "-")
        shutil.copytree(site, copy)
        index = copy / "index.html"
        index.write_text(index.read_text().replace("</main>", plant + "</main>", 1))
        assert plant in index.read_text(), "the fault was not planted"
        problems = check_pages(chromium, copy, serve(copy), [index])
        assert any(expected in problem for problem in problems), (fault, problems)
    assert check_pages(chromium, site, serve(site), [site / "index.html"]) == [], "the unchanged page passes"
