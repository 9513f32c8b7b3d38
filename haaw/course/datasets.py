"""Small data sets generated on the spot: nothing is downloaded, everything is seeded."""
from __future__ import annotations

import numpy as np


def two_moons(n: int = 200, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved half circles in 2-D: points of shape (n, 2), integer labels 0 and 1.

    Not separable by a straight line, so a model needs a hidden layer to get them right.
    """
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    angle = rng.uniform(0, np.pi, n)
    x = np.where(labels == 0, np.cos(angle), 1 - np.cos(angle))
    y = np.where(labels == 0, np.sin(angle), 0.5 - np.sin(angle))
    points = np.stack([x, y], axis=1) + rng.normal(0, noise, (n, 2))
    return points, labels
