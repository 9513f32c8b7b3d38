"""Static pictures for the notebooks. matplotlib is imported here, not by ``import haaw``."""
from __future__ import annotations

import numpy as np

from . import style
from .nb01 import tiny_chain_step
from .style import PALETTE as P
from .style import SMALLEST_TEXT
from .style import show_figure  # noqa: F401  (the notebooks take it from here, beside the plots)

LIGHT = ("#A6CEE3", "#FDD49E")  # light blue and light orange, for the two regions behind the points
style.apply()


def plot_tangent_step(w: float = 2.0, x: float = 3.0, lr: float = 0.01, ax=None):
    """L(w) = (w·x)², its tangent at w (slope dL/dw) and the gradient-descent step."""
    import matplotlib.pyplot as plt

    s = tiny_chain_step(w, x, lr)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    span = max(2.5, abs(w) + 1.0, abs(s.w_new) + 0.5)
    ws = np.linspace(-span, span, 300)
    ax.plot(ws, (ws * x) ** 2, color=P[0], label="L(w) = (w·x)²")
    near = np.linspace(w - 0.8, w + 0.8, 2)
    ax.plot(near, s.loss + s.dL_dw * (near - w), color=P[1], lw=2,
            label=f"tangent at w = {w:g}: slope dL/dw = {s.dL_dw:.3g}")
    ax.plot([w], [s.loss], "o", color=P[1])
    top = max(s.loss, s.loss_new) * 1.6 + 1
    ax.annotate("", xy=(s.w_new, 0.08 * top), xytext=(w, 0.08 * top),
                arrowprops=dict(arrowstyle="->", color=P[2], lw=2))
    ax.text((w + s.w_new) / 2, 0.11 * top, "step −η·dL/dw", ha="center", fontsize=SMALLEST_TEXT, color=P[2])
    for at, height in ((w, s.loss), (s.w_new, s.loss_new)):
        ax.plot([at, at], [0, height], ls=":", color="0.6", lw=1)
    # no numbers in the legend: at the defaults they are the answer to notebook 01's exercise 4
    ax.plot([s.w_new], [s.loss_new], "o", color=P[2], label="after one step")
    ax.set(xlabel="w", ylabel="L", ylim=(-0.05 * top, top), xlim=(-span, span))
    ax.axhline(0, color="0.8", lw=0.8)
    ax.legend(loc="upper center", fontsize=SMALLEST_TEXT, frameon=False)
    return ax


def plot_matmul_shapes(B: int = 4, n: int = 3, m: int = 2, ax=None):
    """The three products of a linear layer drawn to scale: Y = XW, dW = XᵀG, dX = GWᵀ."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3))
    colours = {"X": P[0], "W": P[1], "Y": "#8c8c8c", "G": P[3],
               "Xᵀ": P[0], "Wᵀ": P[1], "dW": P[1], "dX": P[0]}
    rows = [("Y = X W", [("X", B, n), ("W", n, m), ("Y", B, m)]),
            ("dL/dW = Xᵀ G", [("Xᵀ", n, B), ("G", B, m), ("dW", n, m)]),
            ("dL/dX = G Wᵀ", [("G", B, m), ("Wᵀ", m, n), ("dX", B, n)])]
    cell, x0, top = 0.3, 0.0, 0.0
    for title, mats in rows:
        x = x0
        ax.text(x0, top + 0.5, title, fontsize=10, weight="bold")
        for k, (name, r, c) in enumerate(mats):
            ax.add_patch(Rectangle((x, top - r * cell), c * cell, r * cell, facecolor=colours[name],
                                   alpha=0.35 if name in ("dW", "dX", "Y") else 0.8, edgecolor="black"))
            ax.text(x + c * cell / 2, top - r * cell - 0.35, f"{name}\n{r}×{c}", ha="center", va="top", fontsize=SMALLEST_TEXT)
            x += c * cell + 0.7
            if k < 2:
                ax.text(x - 0.35, top - 0.45, "=" if k == 1 else "@", fontsize=11, ha="center", va="center")
        x0 = x + 0.6
    ax.set_xlim(-0.2, x0)
    tallest = max(r for _, mats in rows for _, r, _ in mats)
    ax.set_ylim(top - tallest * cell - 1.1, top + 0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def plot_decision_boundary(model, points, labels, ax=None, title=""):
    """The class a 2-D classifier predicts everywhere (background) and the data (dots)."""
    import matplotlib.pyplot as plt

    from ..engine import Tensor, no_grad

    if ax is None:
        _, ax = plt.subplots(figsize=(4, 3.5))
    pad = 0.5
    xs = np.linspace(points[:, 0].min() - pad, points[:, 0].max() + pad, 120)
    ys = np.linspace(points[:, 1].min() - pad, points[:, 1].max() + pad, 120)
    grid_x, grid_y = np.meshgrid(xs, ys)
    with no_grad():
        logits = model(Tensor(np.stack([grid_x.ravel(), grid_y.ravel()], axis=1))).data
    ax.contourf(grid_x, grid_y, logits.argmax(axis=1).reshape(grid_x.shape), levels=[-0.5, 0.5, 1.5],
                colors=[LIGHT[0], LIGHT[1]], alpha=0.7)
    ax.scatter(points[:, 0], points[:, 1], c=np.where(labels == 0, P[0], P[1]), s=10, edgecolor="k", lw=0.3)
    ax.set(title=title, xticks=[], yticks=[])
    return ax


def plot_gradient_norms(curves: dict, ax=None, title: str = "", legend: bool = True):
    """Gradient norm reaching each layer's input, one line per setting, on a log scale.

    With more than one line, the legend goes outside the axes, to the right, where it cannot cover a line
    (``legend=False`` leaves it out, for all but one panel of a row that shares one)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    for name, norms in curves.items():
        ax.semilogy(np.arange(len(norms)), norms, label=name)
    ax.set(xlabel="layer (0 = input end)", ylabel="‖dL/d(layer input)‖", title=title)
    if legend and len(curves) > 1:
        ax.legend(frameon=False, fontsize=SMALLEST_TEXT, loc="upper left", bbox_to_anchor=(1.01, 1))
    return ax


def plot_attention_row(d_k: int, scaled: bool = True, temperature: float = 1.0, ax=None):
    """The attention weights one query gives 16 random keys."""
    import matplotlib.pyplot as plt

    from .nb05 import attention_row

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 2.6))
    row = attention_row(d_k, scaled, temperature)
    ax.bar(np.arange(len(row["weights"])), row["weights"], color=P[0])
    ax.set(ylim=(0, 1), xlabel="key", ylabel="attention weight",
           title=f"d_k = {d_k}, {'÷√d_k' if scaled else 'unscaled'}, T = {temperature:g}: entropy {row['entropy']:.2f}")
    return ax


def plot_block_gradients(root, named: dict, ax=None):
    """The tensors in ``named`` (label -> tensor), top to bottom in the order they were computed,
    joined as the engine's graph joins them (``haaw.tools.condense``), each with ‖dL/d·‖.

    An arrow into a box comes from the nearest named tensor it was computed from; an arrow that skips
    boxes, drawn on the right, is a residual path. A tensor computed by a sum gets a circled + just above
    its box, where the arrows of its inputs meet: the node whose backward hands its gradient to both.
    Narrow enough to read at any notebook width."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    from ..engine.autograd import topological_order
    from ..engine.graph import operation, parents
    from ..tools.condense import condense

    summary = condense(root, {id(t): (label, operation(t)) for label, t in named.items()})
    order = topological_order(summary)  # each box after the boxes it was computed from
    row = {id(s): i for i, s in enumerate(order)}
    is_sum = {id(s): operation(s) == "add" and len(parents(s)) == 2 for s in order}
    height, y = {}, 0.0
    for s in order:  # a sum's box sits lower, to leave room for its + above it
        y -= (1.6 if is_sum[id(s)] else 1.0) if height else 0.0
        height[id(s)] = y
    if ax is None:
        _, ax = plt.subplots(figsize=(4.4, 0.62 * (1 - y) + 0.7))
    half_w, half_h, lane = 1.0, 0.25, 1.25  # residual paths run down the lane, right of the boxes
    sum_size = 18  # points: the circled + (a marker, round at any aspect ratio)
    arrow = dict(arrowstyle="-|>", color="#777", lw=1.2, shrinkA=0, shrinkB=1)
    residual = dict(color=P[3], lw=1.4, ls="-")
    for s in order:
        y = height[id(s)]
        grad = "no gradient" if s.grad is None else f"‖grad‖ = {s.grad:.3f}"
        ax.add_patch(FancyBboxPatch((-half_w, y - half_h), 2 * half_w, 2 * half_h, boxstyle="round,pad=0.02",
                                    fc="#f4f7fb", ec="#333"))
        ax.text(-0.92, y, s.label, ha="left", va="center", fontsize=10, fontweight="bold")
        ax.text(0.92, y, grad, ha="right", va="center", fontsize=10)
        into = (0, y + 0.8) if is_sum[id(s)] else (0, y + half_h)  # where the inputs' arrows end
        end = sum_size / 2 + 1 if is_sum[id(s)] else 1  # points short of it: the circle's edge
        if is_sum[id(s)]:
            ax.plot(*into, "o", ms=sum_size, mfc="white", mec=P[3], mew=1.6, zorder=3)
            ax.text(*into, "+", ha="center", va="center", fontsize=13, fontweight="bold", color=P[3], zorder=4)
            ax.annotate("", xy=(0, y + half_h), xytext=into, arrowprops={**arrow, "shrinkA": sum_size / 2})
        for p in parents(s):
            top = height[id(p)]
            if row[id(s)] - row[id(p)] == 1:
                ax.annotate("", xy=into, xytext=(0, top - half_h), arrowprops={**arrow, "shrinkB": end})
            else:  # a residual path: out of the right of its box, down the lane, into the + (or the box)
                meet = into if is_sum[id(s)] else (half_w, y)
                ax.plot([half_w, lane, lane], [top, top, meet[1]], **residual)
                ax.annotate("", xy=meet, xytext=(lane, meet[1]), annotation_clip=False,
                            arrowprops=dict(arrowstyle="-|>", shrinkA=0, shrinkB=end, **residual))
    ax.set_title("forward runs down; ⊕ adds its two inputs;\n‖grad‖ = ‖dL/d·‖ after backward", fontsize=SMALLEST_TEXT)
    ax.set(xlim=(-1.1, 1.4), ylim=(min(height.values()) - 0.5, 0.5))
    ax.axis("off")
    return ax


def plot_memory_budget(rows: dict, ax=None):
    """Stacked bars, one per configuration: weights, gradients, optimizer state, activations, and any
    other category a row has, such as the layer being recomputed (GiB)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    names = list(rows)
    parts = list(dict.fromkeys(part for row in rows.values() for part in row))
    bottom = np.zeros(len(names))
    for part, colour in zip(parts, [P[0], P[1], P[2], P[3], P[4]]):
        heights = np.array([rows[n].get(part, 0) / 2**30 for n in names])
        ax.barh(names, heights, left=bottom, color=colour, label=part)
        bottom += heights
    ax.set(xlabel="GiB")
    ax.invert_yaxis()
    ax.legend(frameon=False, fontsize=SMALLEST_TEXT, ncol=3, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    return ax


def plot_gradient_ranges(values: np.ndarray, formats=("float16", "bfloat16"), scale: float = 1.0, ax=None):
    """Histogram of log₂|value × scale|, with each format's smallest subnormal, smallest normal and max.

    The axis spans 2⁻⁴⁵ to 2²⁰, wider where the values reach further.
    """
    import matplotlib.pyplot as plt

    from ..amp import format_table

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    v = np.abs(np.asarray(values, dtype=np.float64) * scale)
    v = v[v > 0]
    logs = np.log2(v)
    low = min(-45, int(np.floor(logs.min())) - 2) if logs.size else -45
    high = max(20, int(np.ceil(logs.max())) + 2) if logs.size else 20
    ax.hist(logs, bins=80, color="#8c8c8c")
    rows = {r["format"]: r for r in format_table()}
    # each format its own colour and its own three dash patterns: no two lines told apart by colour alone
    patterns = ((":", "--", "-"), ((0, (1, 3)), "-.", (0, (8, 2))), ((0, (2, 1, 1, 1)), (0, (5, 3)), (0, (4, 1, 1, 1, 1, 1))))
    for name, colour, dashes in zip(formats, [P[3], P[0], P[2]], patterns):
        r = rows[name]
        for key, line in zip(("smallest subnormal", "smallest normal", "max"), dashes):
            e = float(np.log2(r[key]))  # the largest is no power of two (fp16's is 65504): say the number
            label = f"{name} largest: {r[key]:.6g}" if key == "max" else f"{name} {key}: 2^{e:.0f}"
            if low <= e <= high:
                ax.axvline(e, color=colour, ls=line, lw=1.5, label=label)
            else:  # keep it in the legend, say where it is
                ax.plot([], [], color=colour, ls=line, label=label + " (off the chart)")
    ax.set(xlabel=f"log₂ |gradient{' × ' + format(scale, 'g') if scale != 1 else ''}|", ylabel="count",
           xlim=(low, high))
    ax.legend(frameon=False, fontsize=SMALLEST_TEXT, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return ax


def plot_training_loop(milliseconds: dict, ax=None):
    """The training loop as a circle of its phases, each labelled with its measured time."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5.5))
    names = list(milliseconds)
    angles = np.pi / 2 - 2 * np.pi * np.arange(len(names)) / len(names)
    xs, ys = np.cos(angles), np.sin(angles)
    for i, name in enumerate(names):
        ax.text(xs[i], ys[i], f"{name}\n{milliseconds[name]:.1f} ms", ha="center", va="center", fontsize=10,
                bbox=dict(boxstyle="round,pad=0.5", fc="#eef3fb", ec=P[0]))
        j = (i + 1) % len(names)
        ax.annotate("", xy=(0.78 * xs[j] + 0.22 * xs[i], 0.78 * ys[j] + 0.22 * ys[i]),
                    xytext=(0.78 * xs[i] + 0.22 * xs[j], 0.78 * ys[i] + 0.22 * ys[j]),
                    arrowprops=dict(arrowstyle="->", color="0.4", lw=1.5))
    ax.text(0, 0, "repeat", ha="center", va="center", fontsize=11, color="0.4")
    ax.set(xlim=(-1.5, 1.5), ylim=(-1.4, 1.4), aspect="equal")
    ax.axis("off")
    return ax
