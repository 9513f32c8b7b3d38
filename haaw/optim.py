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
        from .tensor import no_grad

        with no_grad():  # the update is not part of any graph
            for p in self.params:
                if p.grad is not None:  # frozen parameters (requires_grad=False) never get one
                    p -= self.lr * p.grad  # in place, and versioned: a graph that saved p will notice

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


def clip_grad_norm(params, max_norm: float) -> float:
    """Scale all gradients together so that their global norm is at most ``max_norm``.

    Returns the norm *before* clipping: the number to log and watch. Clipping hides a
    symptom (one huge step); it does not fix what made the gradient huge.
    """
    import numpy as np

    grads = [p.grad for p in params if p.grad is not None]
    total = float(np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads)))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for p in params:
            if p.grad is not None:
                p.grad = p.grad * scale  # a new array: gradients are never changed in place
    return total
