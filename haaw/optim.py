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
            if p.grad is not None:  # frozen parameters (requires_grad=False) never get one
                p.data -= self.lr * p.grad  # in place, outside any graph...
                p._version += 1  # ...and versioned: a graph that saved p will notice

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


class Adam:
    """Adam (Kingma & Ba, 2014): each parameter's step is its gradient's running mean divided by the
    square root of its running mean square, so every parameter moves at a similar pace whatever
    the size of its gradient. It keeps two extra numbers per parameter (notebook 06's optimizer state)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        import numpy as np

        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got no parameters: did the model create any with requires_grad=True?")
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]
        self.steps = 0

    def step(self) -> None:
        import numpy as np

        from .tensor import no_grad

        self.steps += 1
        correction1, correction2 = 1 - self.beta1**self.steps, 1 - self.beta2**self.steps
        with no_grad():
            for p, m, v in zip(self.params, self.m, self.v):
                if p.grad is None:
                    continue
                m *= self.beta1
                m += (1 - self.beta1) * p.grad
                v *= self.beta2
                v += (1 - self.beta2) * p.grad**2
                p -= self.lr * (m / correction1) / (np.sqrt(v / correction2) + self.eps)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None
