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
