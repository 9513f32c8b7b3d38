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
        figures: [...main.querySelectorAll('.cell_output img')].map(img => ({alt: img.getAttribute('alt'),
            width: img.naturalWidth})),
        captions: [...main.querySelectorAll('.haaw-caption')].map(c => ({text: c.textContent,
            font: getComputedStyle(c).fontFamily, wraps: getComputedStyle(c).whiteSpace === 'normal',
            past: c.getBoundingClientRect().right - column().right})),
        textFont: getComputedStyle(main.querySelector('p') || main).fontFamily,
        monospaceCaptions: [...main.querySelectorAll('.cell_output pre')].map(pre => pre.textContent)
            .filter(text => /^Figure: /m.test(text)).length,
        overflowing: [...main.querySelectorAll('mjx-container[display="true"]')].filter(m => {
            const math = m.querySelector('mjx-math') || m;
            if (math.getBoundingClientRect().right <= column().right + 1) return false;
            for (let box = m; box && box !== main; box = box.parentElement) {  // a scrolling box holds it
                const style = getComputedStyle(box);
                if (['auto', 'scroll'].includes(style.overflowX) && box.getBoundingClientRect().right <= column().right + 1)
                    return false;
            }
            return true; }).map(m => m.textContent.slice(0, 60)),
    }; }"""
COLUMN_JS = """function column() {
    return (document.querySelector('article.bd-article') || document.querySelector('main') || document.body)
        .getBoundingClientRect(); }"""
PATH_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|gif|svg|webp)$|^_images/|^data:", re.IGNORECASE)
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


def figure_problems(name: str, shown: dict, expected: list[str] | None) -> list[str]:
    """A page's figures against the descriptions its notebook gives them (``expected``, when known): each figure
    shown with its description as alt text (not a file path, not nothing), and each caption set as text, in the
    text's font, wrapped within the column."""
    problems = []
    alts = {f["alt"] for f in shown["figures"] if f["width"]}
    for figure in shown["figures"]:
        alt = (figure["alt"] or "").strip()
        if not alt or PATH_LIKE.search(alt):
            problems.append(f"{name}: a figure's alt text is {alt!r}, not its description")
    for description in expected or []:
        if description not in alts:
            problems.append(f"{name}: missing figure (not shown with its description as alt): {description[:70]!r}")
    for caption in shown["captions"]:
        if caption["font"] != shown["textFont"] or not caption["wraps"] or caption["past"] > 1:
            problems.append(f"{name}: caption not set as wrapped text in the text's font: {caption['text'][:50]!r}")
    if shown["monospaceCaptions"]:
        problems.append(f"{name}: {shown['monospaceCaptions']} figure caption(s) left in monospace output")
    return problems


def expected_figures(site: Path) -> dict[str, list[str]]:
    """Page -> the descriptions of the figures its notebook shows: every figure the student edition keeps (it
    clears only what gives an answer away)."""
    nbformat = pytest.importorskip("nbformat")
    from haaw.course.editions import student_notebook

    found = {}
    for path in course_notebooks(ROOT / "notebooks"):
        nb = student_notebook(nbformat.read(path, as_version=4))
        page = "notebooks/" + path.relative_to(ROOT / "notebooks").with_suffix(".html").as_posix()
        found[page] = [out.data["text/plain"].removeprefix("Figure: ") for cell in nb.cells
                       for out in cell.get("outputs", []) if "image/png" in out.get("data", {})]
    return found


def check_pages(browser, site: Path, base: str, pages: list[Path], figures: dict | None = None) -> list[str]:
    """Everything wrong with these pages of ``site`` (served at ``base``): an empty list when all is well.
    ``figures``: page -> the descriptions of the figures it must show (``expected_figures``)."""
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
            page.add_script_tag(content=COLUMN_JS)
            shown = page.evaluate(PAGE_JS)
            problems += [f"{name}: picture {img['src']} is not shown" for img in shown["images"] if not img["width"]]
            problems += figure_problems(name, shown, (figures or {}).get(name))
            problems += [f"{name}: a wide equation overflows the column instead of scrolling: {eq!r}"
                         for eq in shown["overflowing"]]
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
    figures = expected_figures(site)
    assert sum(map(len, figures.values())) >= 25, "fewer figures than the course shows: is the edition clearing them?"
    assert check_pages(chromium, site, serve(site), pages, figures) == []


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


LEARNERS_HEADINGS = ("What you will learn", "How to start", "The notebooks")
MAINTAINERS_WORDS = ("pytest", "mutmut", "mutation testing", "ruff")


def home_page_problems(site: Path) -> list[str]:
    """The home page is for learners: what they will learn, how to start, every notebook linked; no maintainers'
    matter (the test commands, mutation testing), which is one link away on readme.html."""
    html = (site / "index.html").read_text()
    main = re.search(r"<main.*</main>", html, re.DOTALL)
    text = re.sub(r"<[^>]+>", " ", main.group(0) if main else html)
    problems = [f"home page: no section {h!r}" for h in LEARNERS_HEADINGS
                if not re.search(rf"<h2[^>]*>\s*{re.escape(h)}", html)]
    for path in course_notebooks(ROOT / "notebooks"):
        href = "notebooks/" + path.relative_to(ROOT / "notebooks").with_suffix(".html").as_posix()
        if f'href="{href}' not in (main.group(0) if main else html):
            problems.append(f"home page: no link to {href}")
    problems += [f"home page: maintainers' matter ({w!r}) on the learners' page" for w in MAINTAINERS_WORDS
                 if re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text, re.IGNORECASE)]
    if 'href="readme.html' not in html or not (site / "readme.html").is_file():
        problems.append("home page: the README is not one link away (readme.html)")
    return problems


def test_the_home_page_is_for_learners_and_the_readme_one_link_away(site):
    assert home_page_problems(site) == []
    readme = (site / "readme.html").read_text()
    assert "pytest" in readme, "readme.html is not the README"


def test_one_command_serves_the_site_and_its_search_shows_what_each_page_says(site, chromium):
    """`build_site.py --serve` (`make serve-site`): over HTTP the search shows each result's text, which a page
    opened from file:// cannot fetch; "chain rule" finds 01 and "loss scaling" finds 07 first."""
    server = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "build_site.py"), str(site), "--serve",
                               "--no-build", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        base = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert base, f"no address printed: {line!r}"
        problems: list[str] = []
        context, page = _offline_page(chromium, base.group(0), problems)
        results = {}
        try:
            for query in ("chain rule", "loss scaling"):
                page.goto(base.group(0) + "search.html?q=" + query.replace(" ", "+"), wait_until="load")
                page.wait_for_function("/found/.test((document.querySelector('#search-results p.search-summary')"
                                       " || {}).textContent)")  # "Search finished, found N pages": all listed
                try:  # each result's text arrives by a fetch of its page, after the list is complete
                    page.wait_for_function("[...document.querySelectorAll('#search-results ul.search li')]"
                                           ".every(li => li.querySelector('p'))", timeout=10_000)
                except Exception:  # noqa: BLE001 (a result without its text is what the assertion below reports)
                    pass
                results[query] = page.evaluate("""[...document.querySelectorAll('#search-results ul.search li')]
                    .map(li => [li.querySelector('a').getAttribute('href'), (li.querySelector('p') || {}).textContent || ''])""")
        finally:
            context.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert problems == []
    assert any("01_chain_rule" in href for href, _ in results["chain rule"]), results["chain rule"]
    assert "07_mixed_precision.html" in results["loss scaling"][0][0], [h for h, _ in results["loss scaling"][:5]]
    for query, found in results.items():
        summaries = [text for _, text in found if text.strip()]
        assert len(summaries) >= len(found) // 2, f"{query!r}: results without the text that matched: titles only"


def test_a_planted_fault_of_each_kind_fails_the_site_check(site, serve, chromium, tmp_path):
    """A missing figure, an alt text that is a file path, an equation that overflows, a caption left as monospace
    output and the README as the home page, each planted in a copy of the site, and the check names it."""
    figures = expected_figures(site)
    name = "notebooks/05_softmax_and_attention.html"  # a wide equation, and figures
    assert figures[name], "05 shows no figure to plant a fault in"

    def drop_a_figure(html):
        return re.sub(r'<img[^>]*class="haaw-figure"[^>]*>', "", html, count=1)

    def alt_is_a_path(html):
        return re.sub(r'(<img[^>]*class="haaw-figure"[^>]*alt=")[^"]*"', r'\1_images/0f3a.png"', html, count=1)

    def caption_as_output(html):
        return re.sub(r'<p class="haaw-caption">([^<]*)</p>', r"<pre>\1</pre>", html, count=1)

    for fault, plant, expected in (("missing figure", drop_a_figure, "missing figure"),
                                   ("alt path", alt_is_a_path, "not its description"),
                                   ("monospace caption", caption_as_output, "monospace")):
        copy = tmp_path / fault.replace(" ", "-")
        shutil.copytree(site, copy)
        page = copy / name
        before = page.read_text()
        page.write_text(plant(before))
        assert page.read_text() != before, f"{fault}: not planted"
        problems = check_pages(chromium, copy, serve(copy), [page], figures)
        assert any(expected in problem for problem in problems), (fault, problems)

    copy = tmp_path / "no-scrolling"  # the rules (the site's and the theme's) that let a wide equation scroll, beaten
    shutil.copytree(site, copy)
    css = copy / "_static" / "haaw.css"
    css.write_text(css.read_text() + "\ndiv.math, mjx-container { overflow: visible !important; }\n")
    problems = check_pages(chromium, copy, serve(copy), [copy / name], figures)
    assert any("overflows the column" in problem for problem in problems), problems

    copy = tmp_path / "readme-home"
    shutil.copytree(site, copy)
    (copy / "index.html").write_text((copy / "readme.html").read_text())
    assert any("maintainers' matter" in p for p in home_page_problems(copy)), home_page_problems(copy)
    assert home_page_problems(site) == [] and check_pages(chromium, site, serve(site), [site / name], figures) == []


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
