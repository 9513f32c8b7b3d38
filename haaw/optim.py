"""Optimizers: they *use* gradients; computing them was backward's job."""
from __future__ import annotations


class SGD:
    """Plain gradient descent: p ← p − lr · dL/dp, for every parameter that has a gradient."""

    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("SGD got no parameters: did the model create any with requires_grad=True?")
        self.lr = lr

    def step(self) -> None:
        for p in self.params:
            if p.grad is not None:
                p.data -= self.lr * p.grad  # in place: the update is not part of any graph

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
