"""The explorers' callbacks, run without a browser: moving a slider changes what is shown.

Slow tier: every test draws figures with matplotlib (the everyday loop keeps to the engine and the checkers)."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")  # the course extra: without it the file is skipped, not an error
pytest.importorskip("ipywidgets")

import matplotlib

from haaw import Value
from haaw.course.explorers import backward_stepper, tangent_explorer

matplotlib.use("Agg")
pytestmark = pytest.mark.slow


def find(widget, kind):
    """Every descendant of ``widget`` of class ``kind``, in display order."""
    found = [widget] if type(widget).__name__ == kind else []
    for child in getattr(widget, "children", ()):
        found += find(child, kind)
    return found


def test_tangent_explorer_recomputes_the_step_when_w_moves():
    box = tangent_explorer()
    w_slider = find(box, "FloatSlider")[0]
    numbers = find(box, "HTML")[0]
    assert "dL/dw = 36" in numbers.value and "= 1.64" in numbers.value
    w_slider.value = -1.0
    assert "dL/dw = -18" in numbers.value and "= -0.82" in numbers.value


def test_backward_stepper_walks_the_pass_one_node_at_a_time():
    w, x = Value(2.0, label="w"), Value(3.0, label="x")
    y = w * x
    y.label = "y"
    L = y**2
    L.label = "L"
    box = backward_stepper(L)
    slider = find(box, "IntSlider")[0]
    text, picture = find(box, "HTML")
    assert slider.max == 2 and text.value.startswith("<pre>Start")
    first_picture = picture.value
    slider.value = 2
    assert "Step 2 of 2: y = w * x" in text.value
    assert "w.grad 0 += 36 → 36" in text.value
    assert picture.value != first_picture and "+= 36" in _drawing(picture.value)
    assert "w = 2 (grad 36)" in _alt(picture.value) and "w = 2 (grad 0)" in _alt(first_picture)
    assert w.grad == 0.0  # exploring does not touch the learner's gradients


def _drawing(page: str) -> str:
    """The SVG inside the stepper's <img> (the drawing goes out as an image with alt text)."""
    import base64
    import re

    return base64.b64decode(re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', page).group(1)).decode()


def _alt(page: str) -> str:
    import html
    import re

    return html.unescape(re.search(r'\balt="([^"]*)"', page).group(1))


def test_matmul_shape_explorer_redraws_for_new_sizes():
    from haaw.course.explorers import matmul_shape_explorer

    box = matmul_shape_explorer()
    batch = find(box, "IntSlider")[0]
    text = find(box, "HTML")[0]
    assert "X (4, 3)" in text.value
    batch.value = 7
    assert "X (7, 3)" in text.value and "B = 7 is summed away" in text.value


def test_gradient_flow_explorer_reacts_to_the_residual_switch():
    from haaw.course.explorers import gradient_flow_explorer

    box = gradient_flow_explorer(depth=30)
    residual = find(box, "Checkbox")[0]
    text = find(box, "HTML")[0]
    plain = text.value
    residual.value = True
    assert text.value != plain and "first layer / last layer" in text.value


def test_attention_scaling_explorer_reacts_to_d_k():
    from haaw.course.explorers import attention_scaling_explorer

    box = attention_scaling_explorer()
    d_k = find(box, "SelectionSlider")[0]
    text = find(box, "HTML")[0]
    assert text.value.startswith("<pre>d_k = 64")
    d_k.value = 512
    assert text.value.startswith("<pre>d_k = 512")


def test_checkpoint_explorer_remeasures_for_a_new_segment_length():
    from haaw.course.explorers import checkpoint_explorer

    box = checkpoint_explorer(depth=4)
    segment = find(box, "IntSlider")[0]
    text = find(box, "HTML")[0]
    before = text.value
    segment.value = 1
    assert text.value != before and "checkpoint every 1 block(s)" in text.value


def test_loss_scale_explorer_reports_less_underflow_at_a_larger_scale():
    from haaw.course.explorers import loss_scale_explorer

    grads = np.array([1e-9, 3e-8, 1e-6, 0.5, -2e-9, 4e-7])  # two under 2⁻²⁵ ≈ 3e-8: they round to 0 in fp16
    box = loss_scale_explorer(grads)
    slider = find(box, "IntSlider")[0]
    text = find(box, "HTML")[0]
    assert "33.3% of the gradients become 0" in text.value
    slider.value = 10  # ×1024 lifts all of them into range
    assert "0.0% of the gradients become 0" in text.value


def test_padding_explorer_shows_the_buggy_loss_moving_with_padding():
    from haaw.course.explorers import padding_explorer

    box = padding_explorer()
    slider = find(box, "IntSlider")[0]
    text = find(box, "HTML")[0]
    before = text.value.splitlines()
    slider.value = 6
    after = text.value.splitlines()
    assert before[1] == after[1]  # mask, then reduce: unchanged
    assert before[2] != after[2]  # mean over the padded size: moves


def test_workers_explorer_recomputes_the_bytes_for_more_workers():
    from haaw.course.explorers import workers_explorer

    box = workers_explorer()
    slider = find(box, "IntSlider")[0]
    text = find(box, "HTML")[0]
    assert "ring all-reduce: each worker sends 42.00 GB" in text.value
    slider.value = 8
    assert "ring all-reduce: each worker sends 49.00 GB" in text.value


def test_sampling_explorer_writes_differently_at_another_temperature():
    from haaw.course.explorers import sampling_explorer
    from haaw.course.nb10 import CharTokenizer, TinyGPT, load_story

    tokenizer = CharTokenizer(load_story())
    box = sampling_explorer(TinyGPT(len(tokenizer), context=8, seed=0), tokenizer, length=20)
    slider = find(box, "FloatSlider")[0]
    text = find(box, "HTML")[0]
    before = text.value
    slider.value = 2.0
    assert text.value != before and text.value.startswith("<pre>the ")


def test_the_glossary_quiz_button_reports_a_score():
    from haaw.course.nb10 import GLOSSARY, glossary_quiz

    box = glossary_quiz()
    dropdowns = find(box, "Dropdown")
    dropdowns[0].value = GLOSSARY[0][0]
    find(box, "Button")[0].click()
    assert f"1 of {len(GLOSSARY)} right" in find(box, "HTML")[-1].value


def test_an_explorer_s_picture_never_joins_pyplot_s_open_figures():
    """Its figure is its own: the inline backend shows and closes pyplot's open figures when any cell ends, and
    ipykernel can run a slider's callback while a cell runs, which once showed an explorer's picture blank."""
    import matplotlib.pyplot as plt

    from haaw.course.explorers import checkpoint_explorer, gradient_flow_explorer, loss_scale_explorer

    plt.close("all")
    for box in (tangent_explorer(), gradient_flow_explorer(depth=4), checkpoint_explorer(depth=2),
                loss_scale_explorer(np.logspace(-8, 2, 50))):
        slider = (find(box, "FloatSlider") + find(box, "IntSlider"))[0]
        slider.value = slider.max
        assert plt.get_fignums() == [], type(slider).__name__


def every_explorer():
    from haaw.course.explorers import (attention_scaling_explorer, checkpoint_explorer, gradient_flow_explorer,
                                       loss_scale_explorer, matmul_shape_explorer, padding_explorer,
                                       sampling_explorer, workers_explorer)
    from haaw.course.nb10 import CharTokenizer, TinyGPT, load_story

    w, x = Value(2.0, label="w"), Value(3.0, label="x")
    tokenizer = CharTokenizer(load_story())
    return {"tangent": tangent_explorer(), "stepper": backward_stepper((w * x) ** 2),
            "matmul": matmul_shape_explorer(), "flow": gradient_flow_explorer(depth=4),
            "attention": attention_scaling_explorer(), "checkpoint": checkpoint_explorer(depth=2),
            "loss scale": loss_scale_explorer(np.logspace(-8, 2, 50)), "padding": padding_explorer(),
            "workers": workers_explorer(),
            "sampling": sampling_explorer(TinyGPT(len(tokenizer), context=8, seed=0), tokenizer, length=5)}


SLIDERS = ("FloatSlider", "IntSlider", "SelectionSlider")
BOXES = ("BoundedFloatText", "BoundedIntText", "Dropdown")


def test_every_slider_has_a_box_beside_it_that_a_screen_reader_can_name():
    """ipywidgets leaves a slider's handle without an accessible name; the number box or drop-down before it
    carries the name, in its description, a label tied to it. Typing in it moves the slider."""
    for name, box in every_explorer().items():
        rows = [row for row in find(box, "HBox") if any(type(c).__name__ in SLIDERS for c in row.children)]
        sliders = [s for kind in SLIDERS for s in find(box, kind)]
        assert sliders and len(rows) >= 1, name
        for slider in sliders:
            row = next(r for r in rows if slider in r.children)
            named = [c for c in row.children if type(c).__name__ in BOXES]
            assert len(named) == 1, f"{name}: a slider has no box beside it"
            named = named[0]
            assert named.description and not slider.description, name
            assert not slider.readout, f"{name}: {named.description} shows an unnamed readout as well as the box"
            choices = slider.options if hasattr(slider, "options") else (slider.min, slider.max)
            other = [v for v in choices if v != slider.value][-1]
            named.value = other
            assert slider.value == other, f"{name}: typing in the box did not move the slider"


def pictures(box):
    """The Output widgets of ``box`` that show something, not the hidden one that holds its script."""
    return [out for out in find(box, "Output") if out.layout.display != "none"]


CONTROLS = SLIDERS + BOXES + ("Checkbox", "Button", "ToggleButton", "Text", "IntText", "FloatText")


def test_every_control_of_every_explorer_has_an_accessible_name():
    """What a screen reader can name each control by, read from the widgets: a slider's handle by the script that
    copies the name of the box beside it onto the handle (``aria-label``: ipywidgets has no setting for it), every
    other control by its own description, a label tied to it. The browser test reads the names Chromium gives."""
    from haaw.course.explorers import BOX_CLASS, NAME_HANDLES_JS
    from haaw.course.nb10 import glossary_quiz

    explorers = {**every_explorer(), "glossary": glossary_quiz()}
    for name, box in explorers.items():
        controls = [c for kind in CONTROLS for c in find(box, kind)]
        assert controls, name
        for control in controls:
            kind = type(control).__name__
            if kind in SLIDERS:
                row = next(r for r in find(box, "HBox") if control in r.children)
                named = [c for c in row.children if BOX_CLASS in c._dom_classes]
                assert len(named) == 1 and named[0].description.strip(), f"{name}: a slider with no named box"
            else:
                assert control.description.strip(), f"{name}: a {kind} without a description"
        if any(find(box, kind) for kind in SLIDERS):
            scripts = [out for out in find(box, "Output") if out.layout.display == "none"]
            assert box.children[-1] in scripts, f"{name}: no script to name its sliders' handles"
            assert [o["data"].get("application/javascript") for o in scripts[0].outputs] == [NAME_HANDLES_JS], name


def test_the_script_names_each_handle_after_the_box_in_its_row():
    """The script's selectors are the classes ipywidgets 8 and noUiSlider give the elements it reads and writes."""
    from haaw.course.explorers import BOX_CLASS, NAME_HANDLES_JS

    for needed in (".noUi-handle", "closest('.widget-hbox')", f".{BOX_CLASS} .widget-label", "'aria-label'",
                   "MutationObserver", "document.body", ":not([aria-label])"):
        assert needed in NAME_HANDLES_JS, needed


def test_every_explorer_picture_comes_with_its_description_in_words(monkeypatch):
    """Outside a kernel an Output widget records nothing, so the call that shows each picture is watched."""
    from haaw.course import style

    shown = []
    monkeypatch.setattr(style, "show_figure", lambda description, fig: shown.append((description, fig)))
    drawing = 0
    for name, box in every_explorer().items():
        if not pictures(box):
            continue
        drawing += 1
        before = len(shown)
        slider = [s for kind in SLIDERS for s in find(box, kind)][0]
        ends = slider.options if hasattr(slider, "options") else (slider.min, slider.max)
        slider.value = [v for v in ends if v != slider.value][0]
        assert len(shown) == before + 1, f"{name}: moving its slider did not draw one described picture"
    assert drawing == 6 and len(shown) == 2 * drawing  # once when built, once when moved
    for description, fig in shown:
        assert fig.axes and len(description.split()) >= 12 and description.endswith("."), description
