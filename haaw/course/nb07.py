"""Data and a trained starting point for the precision notebook (plumbing: the experiments are in the notebook).

A small classifier: 128 examples with 16 features and 8 classes (each label is the largest of 8 random linear
scores, so the classes can be separated), and an MLP 16 → 32 → 32 → 8 with tanh between the layers.
``pretrained_weights`` trains it in fp32 with plain SGD, so that notebook 07 can start where mixed precision
gets hard: late in training, when the model is confident and its gradients are small.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..engine import Tensor
from ..nn import MLP
from ..nn import functional as F
from ..optim import SGD

N, D, C, HIDDEN = 128, 16, 8, 32
SIZES = (D, HIDDEN, HIDDEN, C)


def classification_data(n: int = N, features: int = D, classes: int = C, seed: int = 0):
    """(x, labels): standard-normal inputs, each labelled with the largest of ``classes`` random linear scores."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features))
    labels = np.argmax(x @ rng.standard_normal((features, classes)), axis=1)
    return x, labels


def classifier(weights=None, dtype=np.float32) -> MLP:
    """The notebook's MLP (tanh), holding ``weights`` (fp32 arrays) rounded to ``dtype``; its own start if None."""
    model = MLP(list(SIZES), "tanh", seed=1, dtype=np.float32)
    for p, w in zip(model.parameters(), weights if weights is not None else [p.data for p in model.parameters()]):
        p.data = np.asarray(w, dtype=np.float32).astype(dtype)
    return model


@lru_cache(maxsize=2)
def pretrained_weights(steps: int = 300, lr: float = 1.0) -> tuple:
    """The classifier's weights (fp32 arrays) after ``steps`` steps of full-batch SGD in fp32."""
    x, labels = classification_data()
    model = classifier()
    optimizer = SGD(model.parameters(), lr=lr)
    inputs = Tensor(x.astype(np.float32))
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    weights = tuple(p.data.copy() for p in model.parameters())
    for w in weights:
        w.setflags(write=False)  # shared by every caller (cached): nobody may change them in place
    return weights
