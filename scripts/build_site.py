"""Build the course's website into _site/ (or OUT): the notebooks as committed, with their stored outputs, and
the docs, as static pages that need no network (docs/website.md says what is on it and why Sphinx).

    python scripts/build_site.py [OUT] [--stage DIR]     # or: make site
    python scripts/build_site.py --serve [--port N]       # or: make serve-site: build, then serve on localhost

Sphinx reads a staged copy under build/site-src/ (git-ignored), made here from the repository:
- the home page is for learners (docs/site/home.md: what you will learn, how to start, the notebooks); the
  README, the maintainers' page, is one link away (readme.html);
- each notebook is its student edition (what Binder opens and the download gives: no answer shown before it is
  asked), with a launch box under its title (Binder, from binder/repository.txt, and a download of the
  .ipynb) and, in place of each ipywidgets explorer (which needs a running kernel), a note that says so; under
  a cell whose output the edition cleared because it gives an answer away, a note says so;
- every figure is its <img> with its description as alt text (as ``show_figure`` stores it), and the caption
  printed under it is set as text, not as monospace output;
- docs/*.md, except the instructors' answer key, which stays in the repository;
- a link to a file of the repository that is not on the site points at that file on the repository's host.
No kernel runs and nothing is fetched: MathJax comes from the sphinx-mathjax-offline package, the theme's fonts
and icons from the theme's package.
"""
from __future__ import annotations

import re
import shutil
from html import escape
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "site-src"
CONF = ROOT / "docs" / "site"
LEFT_OUT = {"answer-key.md"}  # the instructors' answer key is not published (as on Binder)
WIDGET = "application/vnd.jupyter.widget-view+json"
LINK = re.compile(r"(\]\()([^)\s]+)(\))")
REMOTE_PICTURE = re.compile(r"!\[([^\]]*)\]\(https?://[^)\s]+\)")  # a badge: the site shows no remote picture


def repository() -> str:
    """'owner/name' of the repository, from the one setting in binder/ ('gh/owner/name')."""
    return (ROOT / "binder" / "repository.txt").read_text().strip().removeprefix("gh/")


def binder_url(notebook: str) -> str:
    """The Binder link that opens one notebook, formed as the README's is."""
    return (f"https://mybinder.org/v2/gh/{repository()}/HEAD?urlpath=lab/tree/notebooks/{notebook}")


def launch_box(name: str) -> str:
    return (
        "```{admonition} Run this notebook\n:class: haaw-launch\n\n"
        "This page shows the notebook as it was last run; its sliders and exercises need a running kernel.\n"
        f"[Launch it on Binder]({binder_url(name)}) (in JupyterLab, nothing to install; the first start can take a "
        f"few minutes), or {{download}}`download the notebook <{Path(name).name}>` and run it on your machine "
        f"(see [how to start]({'../' * (name.count('/') + 1)}index.md#how-to-start)).\n```\n")


def explorer_note(name: str) -> str:
    return (
        "```{admonition} Interactive explorer\n:class: haaw-explorer\n\n"
        "The cell above builds an explorer whose sliders redraw its output in a running notebook; "
        "a static page cannot run it. "
        f"[Launch this notebook on Binder]({binder_url(name)}) or {{download}}`download it <{Path(name).name}>` to use it.\n```\n")


def cleared_note(keys: list[str]) -> str:
    named = ", ".join(f"`{k}`" for k in keys)
    return ("```{admonition} Output left out\n:class: haaw-cleared\n\n"
            f"This cell's output gives away the answer of an exercise above it ({named}). Answer the exercise "
            "first, then run the notebook to see it.\n```\n")


CAPTION = '<p class="haaw-caption">{}</p>'


def _description(output) -> str | None:
    """A figure's description, if ``output`` is a figure shown by ``show_figure``: its text/plain is "Figure: ..."."""
    data = output.get("data", {})
    plain = "".join(data.get("text/plain", ""))
    return plain.removeprefix("Figure: ") if "image/png" in data and plain.startswith("Figure: ") else None


def site_outputs(outputs: list) -> list:
    """A code cell's outputs as the site shows them: each figure as HTML with its description as alt text (a
    notebook run since show_figure stores it so has it already), each caption printed under a figure as a
    paragraph in the text's font, and the other printed lines in order (MyST-NB's own merging of a cell's
    printed text would move every line printed after a figure above it)."""
    import nbformat

    from haaw.course.style import figure_html

    captions = {f"Figure: {d}" for d in map(_description, outputs) if d}
    merged = []
    for out in outputs:
        out = nbformat.from_dict(dict(out))
        if (out.output_type == "stream" and merged and merged[-1].output_type == "stream"
                and merged[-1].name == out.name):
            merged[-1] = nbformat.v4.new_output("stream", name=out.name, text=merged[-1].text + out.text)
            continue
        description = _description(out)
        if description is not None and "text/html" not in out.data:
            out.data = {**out.data, "text/html": figure_html(out.data["image/png"], description)}
        merged.append(out)
    shown = []
    for out in merged:
        if out.output_type != "stream" or out.name != "stdout" or not captions:
            shown.append(out)
            continue
        lines = []
        for line in out.text.splitlines(keepends=True):
            if line.rstrip("\n") in captions:
                if lines:
                    shown.append(nbformat.v4.new_output("stream", name="stdout", text="".join(lines)))
                    lines = []
                shown.append(nbformat.v4.new_output("display_data", data={
                    "text/html": CAPTION.format(escape(line.rstrip("\n"))), "text/plain": line.rstrip("\n")}))
            else:
                lines.append(line)
        if lines:
            shown.append(nbformat.v4.new_output("stream", name="stdout", text="".join(lines)))
    return shown


def _in_notebooks(path: Path) -> str:
    """A notebook's path inside notebooks/: "04_gradient_flow.ipynb", "deeper/04_gradient_flow_deeper.ipynb"."""
    return path.name if path.parent.name != "deeper" else f"deeper/{path.name}"


def stage_notebook(path: Path, out: Path) -> None:
    import copy

    import nbformat

    from haaw.course.editions import EXERCISE, Answers, _output_text, student_notebook

    original = nbformat.read(path, as_version=4)
    nb = student_notebook(copy.deepcopy(original))
    nb.metadata.pop("widgets", None)  # the explorers' saved state: it would only pull in a widget manager
    cells = []
    answers = Answers()
    for i, (cell, was) in enumerate(zip(nb.cells, original.cells)):
        if cell.cell_type == "markdown":
            cell.source = relink_notebook(cell.source)
            if re.match(r"## ", cell.source):
                answers.new_section()
        if cell.cell_type == "code":
            cell.outputs = site_outputs(cell.outputs)
        cells.append(cell)
        if cell.cell_type == "code":
            given_away = answers.given_away(_output_text(was))
            if was.outputs and not cell.outputs and given_away and not EXERCISE.search(was.source):
                cells.append(nbformat.v4.new_markdown_cell(cleared_note(given_away), id=f"haaw-site-cleared-{i}"))
            answers.meet(was.source)
        if i == 0 and cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(launch_box(_in_notebooks(path)), id="haaw-site-launch"))
        # an explorer: in the original (the edition clears one whose saved state says an answer: its note stays)
        if cell.cell_type == "code" and any(WIDGET in o.get("data", {}) for o in was.get("outputs", [])):
            cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
            cells.append(nbformat.v4.new_markdown_cell(explorer_note(_in_notebooks(path)), id=f"haaw-site-explorer-{i}"))
    nb.cells = cells
    nbformat.write(nb, out)


def site_anchor(anchor: str) -> str:
    """A heading's anchor as JupyterLab makes it ("2.-Backward:-one-link-at-a-time", the form the notebooks and docs
    link with) turned into the site's (MyST's GitHub-style slug, "2-backward-one-link-at-a-time")."""
    from urllib.parse import unquote

    from myst_parser.slugs import github_slugify

    return github_slugify(unquote(anchor).replace("`", ""))


def relink_notebook(text: str) -> str:
    """A notebook's links to headings (in the same notebook or another) with the site's anchors."""
    def fix(match):
        path, _, anchor = match.group(2).partition("#")
        if not anchor or re.match(r"[a-z]+:", path) or (path and not path.endswith(".ipynb")):
            return match.group(0)
        return match.group(1) + f"{path}#{site_anchor(anchor)}" + match.group(3)

    return LINK.sub(fix, text)


def relink(text: str, source: Path, staged: set[Path]) -> str:
    """Point a relative link to a repository file that is not on the site at that file on the host."""
    def fix(match):
        target = match.group(2)
        if re.match(r"[a-z]+:|#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        resolved = (source.parent / path).resolve()
        if resolved in staged and anchor and resolved.suffix == ".ipynb":
            return match.group(1) + f"{path}#{site_anchor(anchor)}" + match.group(3)
        if resolved in staged or not resolved.exists() or ROOT not in resolved.parents:
            return match.group(0)
        kind = "tree" if resolved.is_dir() else "blob"
        url = f"https://github.com/{repository()}/{kind}/HEAD/{resolved.relative_to(ROOT).as_posix()}"
        return match.group(1) + url + (f"#{anchor}" if anchor else "") + match.group(3)

    return LINK.sub(fix, REMOTE_PICTURE.sub(r"\1", text))


TOC = """

```{{toctree}}
:hidden:
:caption: The notebooks

{notebooks}
```

```{{toctree}}
:hidden:
:caption: For instructors and maintainers

{docs}
```
"""
README_TITLE = "# The README: the repository, its tests and its tools"


def notebook_title(path: Path) -> str:
    """A notebook's title, its first heading: "01 · The chain rule on one tiny chain"."""
    import nbformat

    first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown")
    return first.source.splitlines()[0].lstrip("# ").strip()


def home_page(notebooks: list[Path]) -> str:
    """The learners' home page: docs/site/home.md with its notebook list and links filled in."""
    companions = {p.name.removesuffix("_deeper.ipynb"): p for p in notebooks if p.parent.name == "deeper"}
    rows = []
    for path in (p for p in notebooks if p.parent.name != "deeper"):
        row = f"- [{notebook_title(path)}](notebooks/{path.name})"
        deeper = companions.get(path.stem)
        if deeper is not None:
            row += f"; going deeper: [{notebook_title(deeper).split(' · ')[0]}](notebooks/deeper/{deeper.name})"
        rows.append(row)
    return ((CONF / "home.md").read_text().replace("{notebooks}", "\n".join(rows))
            .replace("{binder}", binder_url("01_chain_rule.ipynb")).replace("{repository}", repository()))


# the docs pages in the sidebar's order; any other docs/*.md page follows them
DOC_ORDER = ["instructor-guide", "sections", "pytorch", "editions", "testing", "website", "performance",
             "mutation-survivors"]


def stage(folder: Path) -> None:
    from haaw.course.editions import course_notebooks

    if folder.exists():
        shutil.rmtree(folder)
    (folder / "notebooks").mkdir(parents=True)
    (folder / "docs").mkdir()
    notebooks = course_notebooks(ROOT / "notebooks")
    pages = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name not in LEFT_OUT]
    extra = [ROOT / name for name in ("LICENSE", "LICENSE-CC-BY-4.0.txt", "CITATION.cff")]
    pictures = sorted((ROOT / "docs").glob("*.png"))
    results = sorted((ROOT / "docs" / "results").glob("*")) if (ROOT / "docs" / "results").is_dir() else []
    staged = {p.resolve() for p in [ROOT / "README.md", *notebooks, *pages, *extra, *pictures, *results]}
    for path in notebooks:
        (folder / "notebooks" / path.relative_to(ROOT / "notebooks")).parent.mkdir(exist_ok=True)
        stage_notebook(path, folder / "notebooks" / path.relative_to(ROOT / "notebooks"))
    for path in pages:
        (folder / "docs" / path.name).write_text(relink(path.read_text(), path, staged))
    for path in pictures + extra:
        shutil.copy2(path, folder / path.relative_to(ROOT))
    if results:
        shutil.copytree(ROOT / "docs" / "results", folder / "docs" / "results")
    order = {name: i for i, name in enumerate(DOC_ORDER)}
    docs = sorted((p.stem for p in pages), key=lambda stem: (order.get(stem, len(order)), stem))
    docs += [f"results/{p.stem}" for p in results if p.suffix == ".md"]  # the measured figures, written by scripts
    readme = relink((ROOT / "README.md").read_text(), ROOT / "README.md", staged)
    (folder / "readme.md").write_text(re.sub(r"\A# [^\n]*", README_TITLE, readme, count=1))
    docs.insert(0, "readme")
    index = home_page(notebooks)
    index += TOC.format(notebooks="\n".join(f"notebooks/{p.relative_to(ROOT / 'notebooks').with_suffix('').as_posix()}"
                                              for p in notebooks),
                        docs="\n".join(stem if stem == "readme" else f"docs/{stem}" for stem in docs))
    (folder / "index.md").write_text(index)


def build(out: Path, staging: Path = STAGE) -> int:
    from sphinx.cmd.build import build_main

    started = time.perf_counter()
    stage(staging)
    if out.exists():
        shutil.rmtree(out)
    # -W: a warning (a broken cross-reference, a missing picture) fails the build; -E: read every page afresh
    code = build_main(["-b", "html", "-q", "-E", "-W", "--keep-going", "-c", str(CONF),
                       "-d", str(staging / ".doctrees"), str(staging), str(out)])
    if code == 0:
        print(f"site built in {time.perf_counter() - started:.1f} s: open {out / 'index.html'}")
    return code


def serve(folder: Path, port: int = 8000, host: str = "127.0.0.1") -> None:
    """Serve ``folder`` on ``host``:``port`` until interrupted. Over HTTP the search shows each page's matching
    text; from file:// a browser refuses the fetches it needs, and shows titles only."""
    import functools
    import http.server

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((host, port), functools.partial(Quiet, directory=str(folder)))
    print(f"serving the site at http://{host}:{server.server_address[1]}/ (Ctrl-C stops it)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build the course's website (no kernel is run, nothing fetched).")
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "_site", help="the site's folder (default: _site)")
    parser.add_argument("--stage", type=Path, default=STAGE, help="where the pages are staged (default: build/site-src)")
    parser.add_argument("--serve", action="store_true", help="then serve it on localhost (search works fully over HTTP)")
    parser.add_argument("--port", type=int, default=8000, help="the port to serve on (default: 8000; 0: any free one)")
    parser.add_argument("--no-build", action="store_true", help="with --serve: serve the site already in OUT")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if not args.no_build:
        code = build(out, args.stage.resolve())
        if code:
            return code
    if args.serve:
        serve(out, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
