"""The course's figure style: colours that stay apart for colour-blind readers, text that can be read projected.

The colours are Okabe and Ito's palette (2008), made for the common colour-vision deficiencies; each line
also gets its own dash pattern, so that no plot tells two lines apart by colour alone. Text is 10 pt at
least. ``apply()`` sets matplotlib's defaults; the course's plots and explorers call it when imported,
so every notebook's figures follow it.

Every figure is shown with a description in words (``show_figure``): printed under it as a caption, which a
screen reader reads, stored as the figure's plain-text form instead of "<Figure size 600x360 …>", and given to
the picture itself as its alt text. JupyterLab draws an image/png output as an <img> with no alt (its renderer
reads no alt from anywhere), so the figure also goes out as text/html, the same PNG in an <img alt="...">, which
JupyterLab, the website (MyST-NB) and VS Code prefer to the bare PNG.
"""
from __future__ import annotations

# blue, orange, bluish green, vermillion, reddish purple, sky blue, black, yellow (last: faint on white)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (8, 2)), (0, (1, 1)), (0, (3, 1, 3, 1, 1, 1)))
SMALLEST_TEXT = 10  # points


def apply() -> None:
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update({
        "axes.prop_cycle": cycler(color=list(PALETTE)) + cycler(linestyle=list(DASHES)),
        "font.size": 11, "axes.titlesize": 11, "axes.labelsize": 11, "legend.fontsize": SMALLEST_TEXT,
        "xtick.labelsize": SMALLEST_TEXT, "ytick.labelsize": SMALLEST_TEXT, "legend.title_fontsize": SMALLEST_TEXT,
    })


def colour_only_lines(fig) -> list:
    """Pairs of lines that ``fig`` tells apart by colour alone: in one axes, two lines in the legend (their labels do
    not start with "_") in different colours with the same dash pattern and the same marker. Under a
    colour-vision deficiency such a pair reads as one line; ``show_figure`` refuses to show it."""
    found = []
    for ax in fig.get_axes():
        seen = {}
        for line in ax.get_lines():
            if line.get_label().startswith("_"):
                continue
            offset, dashes = line._unscaled_dash_pattern  # the pattern itself: get_linestyle() says "--" for any
            key = (line.get_linestyle() == "None", tuple(dashes or ()), str(line.get_marker()))
            other = seen.setdefault(key, line)
            if other is not line and other.get_color() != line.get_color():
                found.append((ax.get_title() or ax.get_ylabel(), other.get_label(), line.get_label()))
    return found


def show_figure(description: str, fig=None) -> None:
    """Show ``fig`` (pyplot's current figure if None) with ``description`` printed under it, then close it.

    Use it where ``plt.show()`` would go. The description says in words what the picture shows, so that a
    learner who cannot see it (a screen reader reads printed text, not pixels) loses nothing; everyone else
    reads it as a caption. In a notebook it is also the figure's text/plain form, which a frontend that
    cannot show images shows instead."""
    import matplotlib.pyplot as plt

    if not isinstance(description, str) or not description.strip():
        raise ValueError("show_figure needs a description in words of what the figure shows")
    fig = plt.gcf() if fig is None else fig
    alike = colour_only_lines(fig)
    if alike:
        raise ValueError("these lines differ only in colour, which a colour-blind reader cannot see; give each its "
                         f"own dash pattern or marker: {alike}")
    shell = _ipython()
    if shell is not None:
        from IPython.display import display

        data, metadata = shell.display_formatter.format(fig)
        data["text/plain"] = f"Figure: {description}"
        if "image/png" in data:
            data["text/html"] = figure_html(data["image/png"], description)
        metadata = {**metadata, FIGURE_TEXT: figure_text(fig)}  # read by the student edition, which clears a leak
        display(data, raw=True, metadata=metadata)
    plt.close(fig)
    print(f"Figure: {description}")


def figure_html(png: str, description: str) -> str:
    """The figure as HTML: its PNG (base64, as Jupyter stores it) in an <img> whose alt text is ``description``."""
    from base64 import b64encode
    from html import escape

    if isinstance(png, bytes):  # IPython's formatter gives base64 text; raw bytes from another caller
        png = b64encode(png).decode("ascii")
    return (f'<img class="haaw-figure" src="data:image/png;base64,{"".join(png).strip()}" '
            f'alt="{escape(description, quote=True)}">')


FIGURE_TEXT = "haaw/figure-text"  # an output's metadata key: the words drawn in its figure


def figure_text(fig) -> list:
    """The words drawn in ``fig``: titles, axis labels, legend entries and annotations (not tick labels), so that
    a reader of the stored notebook (the student edition's) can see what a picture says without its pixels."""
    texts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.get_axes():
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            texts += [legend.get_title().get_text(), *(t.get_text() for t in legend.get_texts())]
        texts += [t.get_text() for t in ax.texts]
    legends = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return [t for t in texts + legends + [t.get_text() for t in fig.texts] if t and t.strip()]


def _ipython():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
