"""No figure of the course tells its lines apart by colour alone: every plotting function's figure, built with the
arguments that draw the most lines, has no two legend lines in one axes with the same dash pattern and marker
(``style.colour_only_lines``), and ``show_figure`` refuses one that has.

Slow tier: it draws figures with matplotlib."""
import numpy as np
import pytest

pytest.importorskip("matplotlib")

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from haaw.course import plots, style  # noqa: E402

pytestmark = pytest.mark.slow


def every_figure():
    """name -> a figure drawn by each of plots.py's functions that draws lines."""
    from haaw.course.nb04 import deep_stack_grad_norms

    figures = {}
    norms = {f"setting {k}": deep_stack_grad_norms(6, init_scale=0.6 + 0.2 * k) for k in range(6)}
    for name, draw in {
        "tangent step": lambda ax: plots.plot_tangent_step(ax=ax),
        "gradient norms, six settings": lambda ax: plots.plot_gradient_norms(norms, ax=ax),
        "gradient ranges, three formats": lambda ax: plots.plot_gradient_ranges(
            np.logspace(-30, 3, 200), formats=("float16", "bfloat16", "float32"), ax=ax),
        "gradient ranges, fp16 scaled": lambda ax: plots.plot_gradient_ranges(
            np.logspace(-30, 3, 200), formats=("float16",), scale=2.0**40, ax=ax),
    }.items():
        fig, ax = plt.subplots()
        draw(ax)
        figures[name] = fig
    return figures


def test_no_figure_of_the_plots_tells_lines_apart_by_colour_alone():
    figures = every_figure()
    try:
        for name, fig in figures.items():
            assert len([line for ax in fig.axes for line in ax.get_lines() if not line.get_label().startswith("_")]) >= 2
            assert style.colour_only_lines(fig) == [], name
    finally:
        plt.close("all")


def test_show_figure_refuses_lines_that_differ_only_in_colour():
    fig, ax = plt.subplots()
    ax.plot([0, 1], ls="--", color="tab:orange", label="fp16, no scaling")
    ax.plot([1, 0], ls="--", color="tab:green", label="bf16, no master weights")
    ax.plot([1, 1], ls="--", marker="o", color="tab:blue", label="told apart by its marker")
    assert [pair[1:] for pair in style.colour_only_lines(fig)] == [("fp16, no scaling", "bf16, no master weights")]
    with pytest.raises(ValueError, match="differ only in colour"):
        style.show_figure("two dashed lines, one orange and one green, crossing.", fig)
    plt.close("all")
