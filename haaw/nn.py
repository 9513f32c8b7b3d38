"""Layers with parameters, PyTorch-style: a ``Module`` finds its parameters by itself."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor


class Module:
    def parameters(self) -> list[Tensor]:
        """Every tensor with requires_grad in this module and its sub-modules, each once."""
        found, seen = [], set()

        def visit(x):
            if isinstance(x, Tensor):
                if x.requires_grad and id(x) not in seen:
                    seen.add(id(x))
                    found.append(x)
            elif isinstance(x, Module):
                for value in vars(x).values():
                    visit(value)
            elif isinstance(x, (list, tuple)):
                for value in x:
                    visit(value)

        visit(self)
        return found

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features), as in Y = XW.

    (PyTorch stores the transpose, (out, in), and computes x @ W.T + b.)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, seed=0, dtype=np.float64):
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(in_features)  # keeps the output's scale close to the input's
        self.weight = Tensor(rng.uniform(-bound, bound, (in_features, out_features)).astype(dtype),
                             requires_grad=True, label="W")
        self.bias = (Tensor(rng.uniform(-bound, bound, out_features).astype(dtype), requires_grad=True, label="b")
                     if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight
        return y + self.bias if self.bias is not None else y


class MLP(Module):
    """Linear layers with an activation between them (none after the last)."""

    def __init__(self, sizes, activation: str = "relu", *, seed=0, dtype=np.float64):
        self.layers = [Linear(n_in, n_out, seed=seed + i, dtype=dtype)
                       for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]
        if activation not in ("relu", "tanh", "sigmoid"):
            raise ValueError(f"MLP: activation must be 'relu', 'tanh' or 'sigmoid', got {activation!r}")
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = getattr(x, self.activation)()
        return x
