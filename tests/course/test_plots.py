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
