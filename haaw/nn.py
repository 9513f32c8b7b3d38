"""Layers with parameters, PyTorch-style: a ``Module`` finds its parameters by itself."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor


class Module:
    def tensors(self) -> list[Tensor]:
        """Every tensor held by this module and its sub-modules (in lists too), each once, in order."""
        found, seen = [], set()

        def visit(x):
            if isinstance(x, Tensor):
                if id(x) not in seen:
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

    def parameters(self) -> list[Tensor]:
        """The tensors that train: those with requires_grad (frozen ones are left out)."""
        return [t for t in self.tensors() if t.requires_grad]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def freeze(self) -> "Module":
        """Stop training this module: its parameters no longer require (or receive) gradients."""
        for p in self.parameters():
            p.requires_grad = False
            p.grad = None
        return self

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


class LayerNorm(Module):
    """Normalise each feature vector, then a learned scale (1) and shift (0) per feature."""

    def __init__(self, features: int, eps: float = 1e-5, *, dtype=np.float64):
        self.weight = Tensor(np.ones(features, dtype=dtype), requires_grad=True, label="γ")
        self.bias = Tensor(np.zeros(features, dtype=dtype), requires_grad=True, label="β")
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        from .functional import layer_norm

        return layer_norm(x, self.weight, self.bias, self.eps)


class SelfAttention(Module):
    """Multi-head self-attention: project to queries, keys and values, attend per head, project back."""

    def __init__(self, dim: int, heads: int, *, seed=0, dtype=np.float64):
        if dim % heads:
            raise ValueError(f"SelfAttention: dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.q, self.k, self.v, self.out = (Linear(dim, dim, seed=seed + i, dtype=dtype) for i in range(4))

    def split_heads(self, x: Tensor) -> Tensor:  # (B, T, D) -> (B, heads, T, D / heads)
        B, T, D = x.shape
        return x.reshape(B, T, self.heads, D // self.heads).swapaxes(1, 2)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        from .functional import attention

        B, T, D = x.shape
        heads = attention(self.split_heads(self.q(x)), self.split_heads(self.k(x)),
                          self.split_heads(self.v(x)), mask=mask)
        return self.out(heads.swapaxes(1, 2).reshape(B, T, D))


class FeedForward(Module):
    """Linear → GELU → Linear, widening by ``expand`` in between."""

    def __init__(self, dim: int, expand: int = 4, *, seed=0, dtype=np.float64):
        self.up = Linear(dim, expand * dim, seed=seed, dtype=dtype)
        self.down = Linear(expand * dim, dim, seed=seed + 1, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        from .functional import gelu

        return self.down(gelu(self.up(x)))


class TransformerBlock(Module):
    """Pre-norm block: x + Attention(LN(x)), then + FeedForward(LN(·)).

    The two additions are the residual paths: each passes its incoming gradient straight
    through, whatever the sublayer beside it does.
    """

    def __init__(self, dim: int, heads: int, *, seed=0, dtype=np.float64):
        self.ln1, self.ln2 = LayerNorm(dim, dtype=dtype), LayerNorm(dim, dtype=dtype)
        self.attn = SelfAttention(dim, heads, seed=seed, dtype=dtype)
        self.ff = FeedForward(dim, seed=seed + 10, dtype=dtype)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.ff(self.ln2(x))
