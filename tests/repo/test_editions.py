"""The student edition's reader: a leak of each kind planted, and the course's notebooks, README and hints free of them.

tests/repo/test_notebooks.py checks that the edition clears exactly the outputs this reader finds."""
import copy
from pathlib import Path

import pytest

from haaw.course.editions import (FIGURE_TEXT, course_notebooks, hint_gives_away, hint_leaks, leaks, readme_leaks,
                                  reveals, student_notebook)
from haaw.course.exercises import REGISTRY, hint

ROOT = Path(__file__).resolve().parents[2]
nbformat = pytest.importorskip("nbformat")
v4 = nbformat.v4


def lesson(*cells):
    """A notebook of ("md", text), ("code", source) and ("out", source, printed, metadata) cells."""
    nb = v4.new_notebook()
    for kind, source, *rest in cells:
        if kind == "md":
            nb.cells.append(v4.new_markdown_cell(source))
            continue
        cell = v4.new_code_cell(source, execution_count=len(nb.cells) + 1)
        if rest:
            printed, metadata = rest[0], (rest[1] if len(rest) > 1 else {})
            cell.outputs = [v4.new_output("display_data", data={"text/plain": printed}, metadata=metadata)]
        nb.cells.append(cell)
    return nb


def cleared(nb):
    """The code cells whose stored output the student edition clears."""
    return [i for i, c in enumerate(student_notebook(copy.deepcopy(nb)).cells)
            if c.cell_type == "code" and not c.outputs and i > 0]


ASK = ("md", "## 1. A section")
START = ("code", "%matplotlib inline\nfrom haaw.course.exercises import check")


@pytest.mark.parametrize("printed, clears", [
    ("forward mode: 9 forward passes", True),  # one digit, followed by what the question counts
    ("9 layers, 9 of them", False),  # one digit of something else: everywhere in a lesson
    ("9-layer stack", False),
])
def test_a_one_digit_answer_printed_with_what_it_counts_is_cleared(printed, clears):
    nb = lesson(START, ASK, ("code", 'check("02-passes", ...)'), ("out", "print(...)", printed))
    assert (cleared(nb) == [2, 3]) is clears, cleared(nb)


def test_a_whole_number_shows_every_digit_the_edition_and_this_test_count_it_alike():
    """A printed "10" is ten: it gives 10 away, not 12 (02-shared's answer); "12" does, and so does "12.0"."""
    assert not reveals("passes: 10", 12.0) and reveals("passes: 10", 10.0)
    assert reveals("dL/dw = 12", 12.0) and reveals("dL/dw = 12.0", 12.0) and not reveals("dL/dw = 12.5", 12.0)
    assert reveals("step to 1.64", 1.64) and reveals("1.6", 1.64) and not reveals("1.7", 1.64)
    for printed, clears in (("dL/dw = 10", False), ("dL/dw = 12", True)):
        nb = lesson(START, ASK, ("code", 'check("02-shared", ...)'), ("out", "print(...)", printed))
        assert (3 in cleared(nb)) is clears, printed


@pytest.mark.parametrize("printed, clears", [
    ("weights + gradients + Adam's two moments: 16 bytes a parameter", True),
    ("k = 16 : peak kept for backward 15.02 MiB", False),  # a count of something else, in printed output too
    ("16 wide, batch  16   0.9 MiB", False),
])
def test_a_whole_number_printed_gives_a_how_many_answer_away_only_with_what_it_counts(printed, clears):
    nb = lesson(START, ASK, ("code", 'check("06-adam-bytes", ...)'), ("out", "print(...)", printed))
    assert (3 in cleared(nb)) is clears, printed


def test_a_percentage_is_a_share_not_its_number():
    """07-fp16-update's answer is 1.0: "1.0% become 0" does not say it, "holds 1.000000" does."""
    for printed, clears in (("loss scale 2^24:   1.0% become 0", False), ("after 100 updates: 1.000000", True)):
        nb = lesson(START, ASK, ("code", 'check("07-fp16-update", ...)'), ("out", "print(...)", printed))
        assert (3 in cleared(nb)) is clears, printed
    assert reveals("92.7% become 0", 92.7, percent=True) and not reveals("92.7% become 0", 92.7)


def test_an_array_answer_printed_is_cleared():
    nb = lesson(START, ASK, ("code", 'check("03-db", ...)'), ("out", "print(db)", "dL/db = [1. 4.]   (column sums)"),
                ("out", "print(b)", "b = [1. 5.]"))
    assert cleared(nb) == [2, 3]
    assert [(i, k) for i, _, k in leaks(nb)] == [(3, "03-db")]


def test_a_figure_whose_legend_or_title_says_the_answer_is_cleared():
    """show_figure stores the words drawn in a figure; the reader reads them like printed text."""
    said = {FIGURE_TEXT: ["L(w) = (w·x)²", "after one step: w = 1.64"]}
    quiet = {FIGURE_TEXT: ["L(w) = (w·x)²", "after one step"]}
    nb = lesson(START, ASK, ("code", 'check("01-step", ...)'), ("out", "show_figure(...)", "Figure: the step", said),
                ("out", "show_figure(...)", "Figure: the step", quiet))
    assert cleared(nb) == [2, 3]


def explorer_lesson(shown: str):
    """A lesson whose explorer (a cell showing a widget) saved a text box reading ``shown``, beside 01-step."""
    nb = lesson(START, ASK, ("code", 'check("01-step", ...)'), ("code", "explore()"), ("out", "print(w)", "w = 2"))
    nb.cells[3].outputs = [v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2, "version_minor": 0},
        "text/plain": "VBox(...)"})]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0,
        "state": {"m1": {"model_name": "HTMLModel", "state": {"value": f"<pre>{shown}</pre>", "_view_name": "HTMLView"}}}}}
    return nb


def test_an_explorers_saved_state_that_says_an_answer_is_dropped_with_its_view():
    """A saved notebook shows an explorer's last state wherever its view is: an answer there is an answer shown."""
    said = student_notebook(explorer_lesson("update: w ← 2 − 0.01·36 = 1.64"))
    assert "widgets" not in said.metadata and said.cells[3].outputs == []
    assert said.cells[4].outputs  # the cell after it gives nothing away: kept
    quiet = student_notebook(explorer_lesson("update: w ← 2 − η·dL/dw"))
    assert "widgets" in quiet.metadata and quiet.cells[3].outputs


def test_no_explorer_of_the_student_edition_shows_an_answer():
    from haaw.course.editions import widget_leaks

    for path in course_notebooks(ROOT / "notebooks"):
        nb = student_notebook(nbformat.read(path, as_version=4))
        assert not widget_leaks(nb), path.name


def test_show_figure_stores_the_words_drawn_in_the_figure():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from haaw.course.plots import plot_tangent_step
    from haaw.course.style import figure_text

    ax = plot_tangent_step()
    ax.set_title("one step")
    words = figure_text(ax.figure)
    plt.close(ax.figure)
    assert "one step" in words and "after one step" in words and "w" in words
    assert not [w for w in words if reveals(w, 1.64)], "plot_tangent_step's legend at the defaults is 01-step's answer"


def test_a_markdown_cell_right_under_an_exercise_that_states_its_answer_is_found():
    nb = lesson(START, ASK, ("code", 'check("01-step", ...)'), ("md", "After one step w is 1.64."),
                ("md", "The step is 0.36."), ("code", "x = 1"), ("md", "As we saw, 1.64."))
    assert leaks(nb) == [(3, "markdown", "01-step")]
    # a number the question itself states is no answer given away ("at d_k = 64")
    nb = lesson(START, ASK, ("code", 'check("05-score-variance", ...)'), ("md", "Now measure at d_k = 64 and 512."))
    assert leaks(nb) == []
    nb = lesson(START, ASK, ("code", 'check("06-adam-bytes", ...)'), ("md", "16-bit numbers; in all, 16 bytes each."))
    assert leaks(nb) == [(3, "markdown", "06-adam-bytes")]


def test_a_readme_row_that_states_an_answer_of_its_notebook_is_found():
    row = "| 01 | [the chain rule](notebooks/01_chain_rule.ipynb) | one gradient step to {} |"
    assert readme_leaks(row.format("1.64")) == [(1, "01-step")]
    assert readme_leaks(row.format("w")) == []
    assert readme_leaks("| 02 | [graphs](notebooks/02_graphs.ipynb) | one gradient step to 1.64 |") == []


def test_the_readme_states_no_answer():
    assert readme_leaks((ROOT / "README.md").read_text()) == []


@pytest.mark.parametrize("path", course_notebooks(ROOT / "notebooks"), ids=lambda p: p.name)
def test_no_markdown_cell_right_under_an_exercise_states_its_answer(path):
    nb = nbformat.read(path, as_version=4)
    assert [(i, k) for i, kind, k in leaks(nb) if kind == "markdown"] == []


@pytest.mark.parametrize("key, text", [
    ("01-step", "η · dL/dw = 0.01 · 36, so w_new = 2 − 0.01 · 36."),  # the arithmetic that is the answer
    ("04-product", "0.9 ** 50"),
    ("04-clip", "√(3² + 4² + 12²)"),
    ("07-scale", "S = 2⁻²⁴ / 2⁻³⁰ = 2^(30 − 24)."),
    ("09-accumulation-scale", "Average = sum × 1/4."),
    ("10-initial-loss", "−ln(1/31) = ln 31."),
    ("02-shared", "The two contributions are 6 and 6, 12 in all."),
    ("03-db", "It is [1. 4.]."),
    ("05-attention-backward", "dV = Pᵀ G, dP = G Vᵀ, dS = P ⊙ (dP − ⟨dP, P⟩), dQ = dS K / √d_k, dK = dSᵀ Q / √d_k."),
    ("05-layer-norm-backward", "dx = (g − mean(g) − x̂ · mean(g · x̂)) / σ."),
])
def test_a_hint_that_is_the_answer_is_found(key, text):
    assert hint_gives_away(REGISTRY[key], text)


def test_every_hint_leads_to_the_answer_without_being_it():
    assert hint_leaks() == []
    assert all(hint_gives_away(ex, h) is None for ex in REGISTRY.values() for h in ex.hints[:1])


def test_the_last_hint_points_at_solution_only_where_solutions_are_on(monkeypatch):
    key = "01-step"
    last = len(REGISTRY[key].hints)
    monkeypatch.setenv("HAAW_SOLUTIONS", "on")
    assert f"solution({key!r}) shows the worked answer" in hint(key, last).message
    monkeypatch.setenv("HAAW_SOLUTIONS", "off")
    assert "solution(" not in hint(key, last).message and "switched off" in hint(key, last).message
