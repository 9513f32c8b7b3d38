"""Figures everyone can read: the palette stays apart under simulated colour blindness, and no text is small."""
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# Machado, Oliveira and Fernandes (2009): dichromacy (severity 1.0) as a matrix on linear RGB
SIMULATIONS = {
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
APART = 15  # CIE76 ΔE: beyond about 10, two colours in a legend are told apart at a glance


def _lab(hex_colour, simulation=None):
    rgb = np.array([int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    if simulation is not None:
        linear = np.clip(SIMULATIONS[simulation] @ linear, 0, 1)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest(palette, simulation):
    return min(np.linalg.norm(_lab(a, simulation) - _lab(b, simulation)) for a, b in itertools.combinations(palette, 2))


def test_the_course_palette_stays_apart_for_colour_blind_readers():
    from haaw.course.style import PALETTE

    for simulation in (None, "protanopia", "deuteranopia"):
        assert _closest(PALETTE, simulation) >= APART, simulation
    # the check can fail: matplotlib's default colours, which the course used before, merge under both
    tab10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")
    assert _closest(tab10, "protanopia") < APART and _closest(tab10, "deuteranopia") < APART


def test_every_line_gets_its_own_dash_as_well_as_its_colour():
    mpl = pytest.importorskip("matplotlib")

    import haaw.course.explorers  # noqa: F401  (applies the course's style)

    cycle = list(mpl.rcParams["axes.prop_cycle"])
    assert len({str(c["linestyle"]) for c in cycle}) == len(cycle) == len({c["color"] for c in cycle})


def test_no_figure_text_is_smaller_than_10_points():
    mpl = pytest.importorskip("matplotlib")

    import haaw.course.plots  # noqa: F401

    for key in ("legend.fontsize", "xtick.labelsize", "ytick.labelsize", "font.size"):
        assert mpl.rcParams[key] >= 10, key
    sources = [p.read_text() for p in (ROOT / "haaw/course").glob("*.py")]
    sources += ["".join(c["source"]) for p in sorted((ROOT / "notebooks").rglob("*.ipynb"))
                for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code"]
    small = [m for s in sources for m in re.findall(r"fontsize=(\d+(?:\.\d+)?)", s) if float(m) < 10]
    assert not small, small


def test_show_figure_prints_its_description_and_closes_the_figure(capsys, monkeypatch):
    plt = pytest.importorskip("matplotlib.pyplot")

    from haaw.course import style
    from haaw.course.style import show_figure

    # outside a kernel: an IPython shell another test left in this process would display the figure's text too
    monkeypatch.setattr(style, "_ipython", lambda: None)

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    show_figure("a line falling from 1 to 0.")
    assert capsys.readouterr().out == "Figure: a line falling from 1 to 0.\n"
    assert not plt.fignum_exists(fig.number)
    for nothing in ("", "   ", None):
        with pytest.raises(ValueError, match="description in words"):
            show_figure(nothing)


def test_show_figure_gives_the_picture_its_description_as_alt_text(monkeypatch):
    """In a kernel the figure goes out as text/html too: the same PNG in an <img> whose alt is the description,
    which JupyterLab and the website show in place of the bare PNG (whose <img> JupyterLab leaves without alt)."""
    plt = pytest.importorskip("matplotlib.pyplot")
    pytest.importorskip("IPython")
    import html

    from IPython.core.interactiveshell import InteractiveShell

    from haaw.course import style

    shell = InteractiveShell.instance()
    from IPython.core.pylabtools import select_figure_formats

    select_figure_formats(shell, {"png"})  # what %matplotlib inline sets up in a kernel
    shown = []
    monkeypatch.setattr(style, "_ipython", lambda: shell)
    monkeypatch.setattr("IPython.display.display", lambda data, raw, metadata: shown.append((data, metadata)))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    style.show_figure('a line falling from 1 to 0, "steeply" & <fast>.', fig)
    (data, metadata), = shown
    page = data["text/html"]
    alt = html.unescape(re.search(r'\balt="([^"]*)"', page).group(1))
    assert alt == 'a line falling from 1 to 0, "steeply" & <fast>.'
    assert re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1) == "".join(data["image/png"]).strip()
    assert data["text/plain"] == "Figure: " + alt
