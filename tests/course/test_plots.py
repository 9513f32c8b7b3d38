"""The course's plots draw what their captions describe, in the everyday loop (the notebooks draw them only in
the slow tier)."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")


def test_gradient_ranges_keep_a_format_s_off_chart_limits_in_the_legend():
    import matplotlib.pyplot as plt

    from haaw.course.plots import plot_gradient_ranges

    fig, ax = plt.subplots()
    try:
        plot_gradient_ranges(np.geomspace(1e-9, 1e-3, 64), formats=("float16", "bfloat16"), ax=ax)
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
    finally:
        plt.close(fig)
    assert "float16 smallest subnormal: 2^-24" in labels
    assert any(label.startswith("bfloat16 ") and label.endswith("(off the chart)") for label in labels), labels


def test_the_block_diagram_draws_each_residual_sum_as_a_plus_where_its_two_inputs_meet():
    """Notebook 05's text is about what each + does with its gradient: the picture must show the + nodes, each
    between its branch's box and the sum's box, with the residual path from the skip input ending at it."""
    import matplotlib.pyplot as plt

    import haaw.nn.functional as F
    from haaw import Tensor
    from haaw.course.plots import plot_block_gradients
    from haaw.nn import TransformerBlock

    block = TransformerBlock(8, heads=2, seed=1)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((1, 4, 8)), requires_grad=True)
    a = block.ln1(x)
    attended = block.attn(a, mask=F.causal_mask(4))
    h = x + attended
    b = block.ln2(h)
    f = block.ff(b)
    out = h + f
    out.backward(rng.standard_normal(out.shape))
    fig, ax = plt.subplots()
    try:
        plot_block_gradients(out, {"x": x, "LN₁(x)": a, "Attn": attended, "x + Attn": h, "LN₂": b, "FFN": f,
                                   "out": out}, ax=ax)
        at = {t.get_text(): t.get_position()[1] for t in ax.texts if t.get_ha() == "left"}  # each box's label
        pluses = sorted((t.get_position()[1] for t in ax.texts if t.get_text() == "+"), reverse=True)
        ends = [a.xy for a in ax.texts if hasattr(a, "arrow_patch") and a.arrow_patch is not None]
    finally:
        plt.close(fig)
    assert len(pluses) == 2
    assert at["Attn"] > pluses[0] > at["x + Attn"] and at["FFN"] > pluses[1] > at["out"]
    for y in pluses:  # two arrows end at each +: the branch's and the residual path's
        assert sum(np.allclose(end, (0, y)) for end in ends) == 2


def test_gradient_norms_put_their_legend_beside_the_lines_not_over_them():
    """Notebook 04's stacks: several lines fill the axes from end to end, so a legend inside covers one of them."""
    import matplotlib.pyplot as plt

    from haaw.course.plots import plot_gradient_norms

    curves = {name: np.geomspace(1e-1, 1e3, 50) * k for k, name in enumerate(("plain", "residual", "both"), 1)}
    fig, (left, right) = plt.subplots(1, 2)
    try:
        plot_gradient_norms(curves, ax=left, legend=False)
        plot_gradient_norms(curves, ax=right)
        fig.canvas.draw()
        box, axes = right.get_legend().get_window_extent(), right.get_window_extent()
        assert left.get_legend() is None and box.x0 >= axes.x1  # outside, to the right of the axes
        assert [t.get_text() for t in right.get_legend().get_texts()] == list(curves)
        plot_gradient_norms({"this setting": curves["plain"]}, ax=left)  # one line (the explorer): no legend
        assert left.get_legend() is None
    finally:
        plt.close(fig)
