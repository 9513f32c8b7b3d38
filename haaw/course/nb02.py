"""A small network of ``Value``s for notebook 02, where your own ``backward`` trains it.

Plumbing only: the data (two interleaved half moons, labels +1 and -1, as Python floats) and a
multilayer perceptron built from scalar ``Value``s, with every weight drawn from a seeded
generator, so that two models built with the same seed start from exactly the same numbers.
The training loop, the loss and the comparison are in the notebook.
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
    """b + Σ wᵢ·xᵢ, through ReLU unless it is an output neuron."""

    def __init__(self, n_in: int, relu: bool, rng):
        self.w = [Value(float(v)) for v in rng.uniform(-1, 1, n_in)]
        self.b = Value(float(rng.uniform(-0.1, 0.1)))
        self.relu = relu

    def __call__(self, x):
        act = self.b
        for wi, xi in zip(self.w, x):
            act = act + wi * xi
        return act.relu() if self.relu else act

    def parameters(self) -> list:
        return self.w + [self.b]


class MLP:
    """Layers of ``Neuron``s: ``MLP([2, 8, 8, 1])`` takes 2 inputs and returns one score (a Value)."""

    def __init__(self, sizes, seed: int = 0):
        rng = np.random.default_rng(seed)
        last = len(sizes) - 2
        self.sizes = list(sizes)
        self.layers = [[Neuron(n_in, i != last, rng) for _ in range(n_out)]
                       for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]

    def __call__(self, x):
        for layer in self.layers:
            x = [neuron(x) for neuron in layer]
        return x[0] if len(x) == 1 else x

    def parameters(self) -> list:
        return [p for layer in self.layers for neuron in layer for p in neuron.parameters()]
