"""The course's figure style: colours that stay apart for colour-blind readers, text that can be read projected.

The colours are Okabe and Ito's palette (2008), made for the common colour-vision deficiencies; each line
also gets its own dash pattern, so that no plot tells two lines apart by colour alone. Text is 10 pt at
least. ``apply()`` sets matplotlib's defaults; the course's plots and explorers call it when imported,
so every notebook's figures follow it.
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
