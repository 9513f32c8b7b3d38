"""Static pictures for the notebooks. matplotlib is imported here, not by ``import haaw``."""
from __future__ import annotations

import numpy as np

from .tiny_chain import tiny_chain_step


def plot_tangent_step(w: float = 2.0, x: float = 3.0, lr: float = 0.01, ax=None):
    """L(w) = (w·x)², its tangent at w (slope dL/dw) and the gradient-descent step."""
    import matplotlib.pyplot as plt

    s = tiny_chain_step(w, x, lr)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    span = max(2.5, abs(w) + 1.0, abs(s.w_new) + 0.5)
    ws = np.linspace(-span, span, 300)
    ax.plot(ws, (ws * x) ** 2, color="#4c72b0", label="L(w) = (w·x)²")
    near = np.linspace(w - 0.8, w + 0.8, 2)
    ax.plot(near, s.loss + s.dL_dw * (near - w), color="#dd8452", lw=2,
            label=f"tangent at w = {w:g}: slope dL/dw = {s.dL_dw:.3g}")
    ax.plot([w], [s.loss], "o", color="#dd8452")
    top = max(s.loss, s.loss_new) * 1.6 + 1
    ax.annotate("", xy=(s.w_new, 0.08 * top), xytext=(w, 0.08 * top),
                arrowprops=dict(arrowstyle="->", color="#55a868", lw=2))
    ax.text((w + s.w_new) / 2, 0.11 * top, "step −η·dL/dw", ha="center", fontsize=8, color="#55a868")
    for at, height in ((w, s.loss), (s.w_new, s.loss_new)):
        ax.plot([at, at], [0, height], ls=":", color="0.6", lw=1)
    ax.plot([s.w_new], [s.loss_new], "o", color="#55a868",
            label=f"after one step: w = {s.w_new:.3g}, L = {s.loss_new:.3g}")
    ax.set(xlabel="w", ylabel="L", ylim=(-0.05 * top, top), xlim=(-span, span))
    ax.axhline(0, color="0.8", lw=0.8)
    ax.legend(loc="upper center", fontsize=8, frameon=False)
    return ax
