"""A small model and data set for the many-workers notebook, with a picklable gradient function.

Worker processes are started fresh, so what they run must be importable: ``shard_gradient``
rebuilds the model from plain arrays and returns plain arrays.
"""
from __future__ import annotations

import numpy as np

from .nn import MLP
from .tensor import Tensor


def make_data(n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    y = np.sin(x @ np.array([1.0, -2.0, 0.5]))[:, None]
    return x, y


def initial_weights(seed: int = 0) -> list:
    return [p.data.copy() for p in MLP([3, 16, 1], activation="tanh", seed=seed).parameters()]


def model_with(weights) -> MLP:
    model = MLP([3, 16, 1], activation="tanh")
    for p, w in zip(model.parameters(), weights):
        p.data = np.array(w, dtype=np.float64)
    return model


def summed_loss(model, x, y):
    """Sum of squared errors: a sum, so shards add up; divide by the example count to average."""
    err = model(Tensor(x)) - Tensor(y)
    return (err * err).sum()


def shard_gradient(weights, x, y, total: int | None = None) -> list:
    """Gradient of (sum of this shard's squared errors) / total, as plain arrays."""
    model = model_with(weights)
    loss = summed_loss(model, x, y) / float(total or len(x))
    loss.backward()
    return [p.grad.copy() for p in model.parameters()]
