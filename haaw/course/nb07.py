"""Real gradients for the precision notebook: a classifier trained in fp32, its gradients read off.

A 64-class classifier on 2048 examples: the loss is a mean over the batch, so dL/dlogits is
(softmax − onehot) / 2048, and once the model is confident most of those entries are tiny. That
is exactly where fp16 runs out of range (the mechanism Micikevicius et al. 2017 measured).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..engine import Tensor
from ..nn import MLP
from ..nn import functional as F
from ..optim import SGD

N, D, C = 2048, 32, 64


def classification_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D))
    labels = np.argmax(x @ rng.standard_normal((D, C)), axis=1)
    return x, labels


@lru_cache(maxsize=4)
def trained_gradients(steps: int = 100) -> dict:
    """After ``steps`` SGD steps in fp32: dL/dlogits, every parameter gradient, and the weights."""
    x, labels = classification_data()
    model = MLP([D, 128, C], seed=1)
    optimizer = SGD(model.parameters(), lr=1.0)
    inputs = Tensor(x)
    for step in range(steps + 1):
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        if step < steps:
            optimizer.step()
    return {"loss": loss.item(), "dL/dlogits": logits.grad.copy(),
            "parameters": np.concatenate([p.grad.ravel() for p in model.parameters()]),
            "weights": [p.data.copy() for p in model.parameters()]}
