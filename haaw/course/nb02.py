"""Props of notebook 02: a small network of ``Value``s that your own table and ``backward`` train, and the
picture of the gate patterns.

Plumbing only: the data (two interleaved half moons, labels +1 and -1, as Python floats), a
multilayer perceptron built from scalar ``Value``s, with every weight drawn from a seeded
generator, so that two models built with the same seed start from exactly the same numbers, and
a drawing of gradients the notebook computed. The training loop, the loss, the gradients and the
comparisons are in the notebook.
"""
from __future__ import annotations

import numpy as np

from ..engine import Value
from .datasets import two_moons


def moons(n: int = 32, seed: int = 0) -> tuple[list, list]:
    """``n`` points as [x, y] lists of floats, and their labels, +1.0 for one moon and -1.0 for the other."""
    points, labels = two_moons(n, noise=0.1, seed=seed)
    return points.tolist(), [1.0 if label == 0 else -1.0 for label in labels]


class Neuron:
    """b + Σ wᵢ·xᵢ, through the activation (``"tanh"`` or ``"relu"``) unless it is an output neuron."""

    def __init__(self, n_in: int, hidden: bool, rng, activation: str = "tanh"):
        if activation not in ("tanh", "relu"):
            raise ValueError(f"activation must be 'tanh' or 'relu', got {activation!r}")
        self.w = [Value(float(v)) for v in rng.uniform(-1, 1, n_in)]
        self.b = Value(float(rng.uniform(-0.1, 0.1)))
        self.activation = activation if hidden else None

    def __call__(self, x):
        act = self.b
        for wi, xi in zip(self.w, x):
            act = act + wi * xi
        if self.activation == "tanh":
            return act.tanh()
        return act.relu() if self.activation == "relu" else act

    def parameters(self) -> list:
        return self.w + [self.b]


class MLP:
    """Layers of ``Neuron``s: ``MLP([2, 8, 8, 1])`` takes 2 inputs and returns one score (a Value); every hidden
    unit goes through ``activation``, tanh unless told otherwise."""

    def __init__(self, sizes, seed: int = 0, activation: str = "tanh"):
        rng = np.random.default_rng(seed)
        last = len(sizes) - 2
        self.sizes = list(sizes)
        self.layers = [[Neuron(n_in, i != last, rng, activation) for _ in range(n_out)]
                       for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]

    def __call__(self, x):
        for layer in self.layers:
            x = [neuron(x) for neuron in layer]
        return x[0] if len(x) == 1 else x

    def parameters(self) -> list:
        return [p for layer in self.layers for neuron in layer for p in neuron.parameters()]


PATTERNS = {"+": "add distributes", "×": "multiply swaps", "max": "max routes"}


def plot_gates(gates: dict, upstream: float, ax=None):
    """One panel per gate: its two inputs on the left with their values (black) and the gradient each received
    (colour), the gate in the middle, its output on the right with the upstream gradient that arrived there.

    ``gates`` maps a gate's symbol ("+", "×", "max") to (a, b, out, a.grad, b.grad), computed by the engine; each
    panel is titled with the gate's pattern."""
    import matplotlib.pyplot as plt

    from .style import PALETTE, SMALLEST_TEXT

    fig, axes = plt.subplots(1, len(gates), figsize=(3.2 * len(gates), 2.6)) if ax is None else (ax.figure, ax)
    axes = np.atleast_1d(axes)
    for panel, (symbol, (a, b, out, grad_a, grad_b)) in zip(axes, gates.items()):
        panel.set(xlim=(0, 12), ylim=(0, 10), xticks=[], yticks=[], aspect="equal")
        panel.set_title(PATTERNS.get(symbol, symbol))
        for side in panel.spines.values():
            side.set_visible(False)
        panel.add_patch(plt.Circle((6, 5), 1.3, fill=False, lw=1.5))
        panel.text(6, 5, symbol, ha="center", va="center", fontsize=13 if len(symbol) == 1 else SMALLEST_TEXT)
        for y, name, value, grad in ((8.3, "a", a, grad_a), (1.7, "b", b, grad_b)):
            panel.annotate("", xy=(4.8, 5 + (y - 5) * 0.2), xytext=(2.9, y), arrowprops=dict(arrowstyle="->", lw=1))
            panel.text(0, y + 0.5, f"{name} = {value:g}", fontsize=SMALLEST_TEXT)
            panel.text(0, y - 1.1, f"grad {grad:g}", fontsize=SMALLEST_TEXT, color=PALETTE[3], weight="bold")
        panel.annotate("", xy=(10.2, 5), xytext=(7.3, 5), arrowprops=dict(arrowstyle="->", lw=1))
        panel.text(7.5, 5.6, f"out = {out:g}", fontsize=SMALLEST_TEXT)
        panel.text(7.5, 2.6, f"upstream\n{upstream:g}", fontsize=SMALLEST_TEXT, color=PALETTE[3], weight="bold")
    fig.tight_layout()
    return fig
