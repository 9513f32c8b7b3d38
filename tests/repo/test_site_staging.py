"""How scripts/build_site.py stages a notebook's outputs for the website, without building it (the browser test,
tests/browser/test_site.py, builds and reads the site)."""
import html
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")
spec = importlib.util.spec_from_file_location("build_site", ROOT / "scripts" / "build_site.py")
build_site = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_site)
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def figure(description):  # as a notebook run before show_figure sent text/html stores it
    return nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": f"Figure: {description}"})


def test_a_figure_its_caption_and_the_lines_around_it_stay_in_order():
    """MyST-NB would merge every printed line of a cell into its first stream, above the figure."""
    shown = build_site.site_outputs([stream("before\n"), figure("a dot."), stream("Figure: a dot.\nafter\n")])
    kinds = [(o.output_type, o.get("text") or o.data.get("text/html")) for o in shown]
    assert kinds[0] == ("stream", "before\n")
    assert kinds[1][0] == "display_data" and 'alt="a dot."' in kinds[1][1] and PNG in kinds[1][1]
    assert kinds[2] == ("display_data", '<p class="haaw-caption">Figure: a dot.</p>')
    assert kinds[3] == ("stream", "after\n") and len(shown) == 4


def test_a_description_is_escaped_in_the_alt_text_and_the_caption():
    said = 'w < 2 & "η" small.'
    shown = build_site.site_outputs([figure(said), stream(f"Figure: {said}\n")])
    alt = re.search(r'alt="([^"]*)"', shown[0].data["text/html"]).group(1)
    assert html.unescape(alt) == said
    assert shown[1].data["text/html"] == f'<p class="haaw-caption">{html.escape("Figure: " + said)}</p>'


def test_printed_text_that_only_starts_like_a_caption_stays_printed_text():
    shown = build_site.site_outputs([stream("Figure: not a figure of this cell\n")])
    assert [o.output_type for o in shown] == ["stream"]


def test_the_home_page_lists_every_core_and_its_companion_and_no_test_command():
    from haaw.course.editions import course_notebooks

    notebooks = course_notebooks(ROOT / "notebooks")
    page = build_site.home_page(notebooks)
    for path in notebooks:
        assert path.relative_to(ROOT).as_posix() in page, path.name
    assert "pytest" not in page and "{" not in page, "a maintainers' command or an unfilled placeholder"
    assert "(readme.md" in page


@pytest.mark.parametrize("saved", ["update: w ← 2 − 0.01·36 = 1.64", "update: w ← 2 − η·dL/dw"])
def test_an_explorer_keeps_its_note_whether_or_not_the_edition_cleared_it(tmp_path, saved):
    """The student edition clears an explorer whose saved state says an answer (01's said w = 1.64); the page
    still says, in its place, that the explorer needs a running notebook."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · A lesson"),
                nbformat.v4.new_code_cell("from haaw.course.exercises import check"),
                nbformat.v4.new_code_cell('check("01-step", ...)'),
                nbformat.v4.new_code_cell("explore()", outputs=[nbformat.v4.new_output("display_data", data={
                    build_site.WIDGET: {"model_id": "m1", "version_major": 2, "version_minor": 0},
                    "text/plain": "VBox(...)"})])]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
        "state": {"m1": {"model_name": "HTMLModel", "state": {"value": f"<pre>{saved}</pre>"}}}}}
    source, out = tmp_path / "01_lesson.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, source)
    build_site.stage_notebook(source, out)
    staged = nbformat.read(out, as_version=4)
    assert sum("Interactive explorer" in c.source for c in staged.cells if c.cell_type == "markdown") == 1
    assert not any(build_site.WIDGET in o.get("data", {}) for c in staged.cells for o in c.get("outputs", []))
