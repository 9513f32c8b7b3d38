"""Build the course's website into _site/ (or OUT): the notebooks as committed, with their stored outputs, and
the docs, as static pages that need no network (docs/website.md says what is on it and why Sphinx).

    python scripts/build_site.py [OUT] [--stage DIR]     # or: make site

Sphinx reads a staged copy under build/site-src/ (git-ignored), made here from the repository:
- the home page is the README;
- each notebook is its student edition (what Binder opens and the download gives: no answer shown before it is
  asked), with a launch box under its title (Binder, from binder/repository.txt, and a download of the
  .ipynb) and, in place of each ipywidgets explorer (which needs a running kernel), a note that says so;
- docs/*.md, except the instructors' answer key, which stays in the repository;
- a link to a file of the repository that is not on the site points at that file on the repository's host.
No kernel runs and nothing is fetched: MathJax comes from the sphinx-mathjax-offline package, the theme's fonts
and icons from the theme's package.
"""
from __future__ import annotations

import re
import shutil
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
        f"(see the [quick start]({'../' * (name.count('/') + 1)}index.md#quick-start)).\n```\n")


def explorer_note(name: str) -> str:
    return (
        "```{admonition} Interactive explorer\n:class: haaw-explorer\n\n"
        "The cell above builds an explorer whose sliders redraw its output in a running notebook; "
        "a static page cannot run it. "
        f"[Launch this notebook on Binder]({binder_url(name)}) or {{download}}`download it <{Path(name).name}>` to use it.\n```\n")


def _in_notebooks(path: Path) -> str:
    """A notebook's path inside notebooks/: "04_gradient_flow.ipynb", "deeper/04_gradient_flow_deeper.ipynb"."""
    return path.name if path.parent.name != "deeper" else f"deeper/{path.name}"


def stage_notebook(path: Path, out: Path) -> None:
    import nbformat

    from haaw.course.editions import student_notebook

    nb = student_notebook(nbformat.read(path, as_version=4))
    nb.metadata.pop("widgets", None)  # the explorers' saved state: it would only pull in a widget manager
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            cell.source = relink_notebook(cell.source)
        cells.append(cell)
        if i == 0 and cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(launch_box(_in_notebooks(path)), id="haaw-site-launch"))
        if cell.cell_type == "code" and any(WIDGET in o.get("data", {}) for o in cell.outputs):
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
    index = relink((ROOT / "README.md").read_text(), ROOT / "README.md", staged)
    index += TOC.format(notebooks="\n".join(f"notebooks/{p.relative_to(ROOT / 'notebooks').with_suffix('').as_posix()}"
                                              for p in notebooks),
                        docs="\n".join(f"docs/{stem}" for stem in docs))
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


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Build the course's website (no kernel is run, nothing fetched).")
    parser.add_argument("out", nargs="?", type=Path, default=ROOT / "_site", help="the site's folder (default: _site)")
    parser.add_argument("--stage", type=Path, default=STAGE, help="where the pages are staged (default: build/site-src)")
    args = parser.parse_args(argv)
    return build(args.out.resolve(), args.stage.resolve())


if __name__ == "__main__":
    sys.exit(main())
