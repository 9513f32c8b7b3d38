"""Layers with parameters, PyTorch-style: a ``Module`` finds its parameters by itself.

Every Tensor held by a module (directly, in a sub-module, or in a list of them) is one of its
parameters, frozen or not; haaw has no separate ``nn.Parameter`` type. Layers draw their initial
weights from haaw's generator (``haaw.manual_seed`` makes that reproducible), or from their own
``seed=`` when one is given, so two ``Linear(4, 4)`` start from different weights unless asked not to.
"""
from __future__ import annotations

import numpy as np

from ..engine import Tensor
from ..engine.tensor import changed_in_place
from . import generator
from .functional import dropout, gelu, layer_norm, linear, scaled_dot_product_attention


def _offset(seed, k):
    """The seed of a model's k-th sub-layer: each differs, all follow from the model's seed."""
    return None if seed is None else seed + k


class Module:
    training = True  # train() and eval() set it on the module and every sub-module, as in PyTorch

    def named_parameters(self, prefix: str = ""):
        """(dotted name, tensor) for every parameter of this module and its sub-modules, each once, under the
        first name that reaches it."""
        seen = set()

        def visit(x, name):
            if isinstance(x, (Tensor, Module, list, tuple, dict)):
                # a tensor shared by two layers (tied weights) counts once, and a module that holds its parent
                # is not entered again (it would be forever), as PyTorch's memo does
                if id(x) in seen:
                    return
                seen.add(id(x))
            if isinstance(x, Tensor):
                yield name, x
            elif isinstance(x, Module):
                for key, value in vars(x).items():
                    yield from visit(value, f"{name}.{key}" if name else key)
            elif isinstance(x, (list, tuple)):
                for i, value in enumerate(x):
                    yield from visit(value, f"{name}.{i}" if name else str(i))
            elif isinstance(x, dict):  # PyTorch needs an nn.ModuleDict or nn.ParameterDict for these
                for key, value in x.items():
                    yield from visit(value, f"{name}.{key}" if name else str(key))

        return visit(self, prefix)

    def parameters(self) -> list[Tensor]:
        """Every parameter, including frozen ones (``requires_grad=False``), as in PyTorch."""
        return [p for _, p in self.named_parameters()]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def state_dict(self) -> dict:
        """Dotted name -> parameter, detached: the same memory, outside the graph, as PyTorch's. Save it with
        ``np.savez(path, **{k: v.numpy() for k, v in m.state_dict().items()})``."""
        return {name: p.detach() for name, p in self.named_parameters()}

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy each entry of ``state_dict`` (Tensors or arrays) into the parameter of that name, in place, as
        PyTorch does; ``strict`` refuses a missing or an unexpected name. Returns (missing, unexpected)."""
        mine = dict(self.named_parameters())
        missing, unexpected = sorted(set(mine) - set(state_dict)), sorted(set(state_dict) - set(mine))
        if strict and (missing or unexpected):
            raise RuntimeError(f"load_state_dict: missing {missing}, unexpected {unexpected} (strict=False loads "
                               "the names that match)")
        for name in set(mine) & set(state_dict):
            p, value = mine[name], state_dict[name]
            value = np.asarray(value.data if isinstance(value, Tensor) else value)
            if value.shape != p.shape:
                raise RuntimeError(f"load_state_dict: {name} has shape {p.shape}, the value {value.shape}"
                                   + (" (haaw's Linear weight is (in, out): transpose PyTorch's)" if
                                      value.shape == p.shape[::-1] else ""))
            p.data[...] = value
            changed_in_place(p)
        return missing, unexpected

    def modules(self):
        """This module and every sub-module it holds (in attributes, lists, tuples and dicts), each once, as
        PyTorch's ``modules()``: a module that holds its parent is not visited again."""
        seen, stack = set(), [self]
        while stack:
            x = stack.pop()
            if id(x) in seen:
                continue
            seen.add(id(x))
            if isinstance(x, Module):
                yield x
                stack.extend(reversed(list(vars(x).values())))
            elif isinstance(x, (list, tuple)):
                stack.extend(reversed(x))
            elif isinstance(x, dict):
                stack.extend(reversed(list(x.values())))

    def train(self, mode: bool = True) -> "Module":
        """Training mode (``mode=True``) or evaluation mode for this module and every sub-module: what layers
        such as ``Dropout`` do depends on it. Returns the module, as PyTorch's."""
        if not isinstance(mode, bool):
            raise ValueError(f"train(mode): mode is True or False, got {mode!r} (eval() is train(False))")
        for m in self.modules():
            m.training = mode
        return self

    def eval(self) -> "Module":
        """Evaluation mode: ``train(False)``. Gradients are still recorded; ``no_grad()`` turns them off."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Train (True) or freeze (False) every parameter of this module; returns the module."""
        for p in self.parameters():
            p.requires_grad = requires_grad
            if not requires_grad:
                p.grad = None
        return self

    def freeze(self) -> "Module":
        """``requires_grad_(False)``: its parameters no longer require (or receive) gradients."""
        return self.requires_grad_(False)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features), as in Y = XW.

    (PyTorch stores the transpose, (out, in), and computes x @ W.T + b.)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, seed=None, dtype=np.float64):
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
                raise ValueError(f"Linear: {name} must be a positive whole number, got {n!r}")
        rng = generator.rng(seed)
        # PyTorch's default draw: uniform on ±1/√in_features. A uniform draw on (−a, a) has the standard deviation
        # a/√3, so the weights' variance is 1/(3·in_features), a third of the 1/in_features that keeps a linear
        # layer's output at its input's scale: each layer shrinks the signal by about √3 (√6 with a ReLU after
        # it, whose rule is 2/in_features). Notebook 04 derives the rule and draws with it.
        bound = 1.0 / np.sqrt(in_features)
        self.weight = Tensor(rng.uniform(-bound, bound, (in_features, out_features)).astype(dtype),
                             requires_grad=True, label="W")
        self.bias = (Tensor(rng.uniform(-bound, bound, out_features).astype(dtype), requires_grad=True, label="b")
                     if bias else None)

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)


class MLP(Module):
    """Linear layers with an activation between them (none after the last)."""

    def __init__(self, sizes, activation: str = "relu", *, seed=None, dtype=np.float64):
        if activation not in ("relu", "tanh", "sigmoid"):
            raise ValueError(f"MLP: activation must be 'relu', 'tanh' or 'sigmoid', got {activation!r}")
        self.layers = [Linear(n_in, n_out, seed=_offset(seed, i), dtype=dtype)
                       for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))]
        self.activation = activation

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = getattr(x, self.activation)()
        return x


class Dropout(Module):
    """In training mode, zero each entry with probability ``p`` and scale the rest by 1/(1 − p); in evaluation
    mode (``eval()``), pass the input through. ``F.dropout`` with the module's mode: the same draws from haaw's
    generator, which ``haaw.manual_seed`` resets and a checkpoint's recomputation replays."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p is the probability of zeroing an entry, from 0 to 1, got {p!r}")
        if inplace:
            raise NotImplementedError("Dropout(inplace=True): haaw's dropout makes a new tensor; leave inplace out")
        self.p = float(p)

    def forward(self, input: Tensor) -> Tensor:
        return dropout(input, self.p, self.training)

    def __repr__(self) -> str:
        return f"Dropout(p={self.p})"


class LayerNorm(Module):
    """Normalise each feature vector, then a learned scale (1) and shift (0) per feature."""

    def __init__(self, features: int, eps: float = 1e-5, *, dtype=np.float64):
        self.weight = Tensor(np.ones(features, dtype=dtype), requires_grad=True, label="γ")
        self.bias = Tensor(np.zeros(features, dtype=dtype), requires_grad=True, label="β")
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


class SelfAttention(Module):
    """Multi-head self-attention: project to queries, keys and values, attend per head, project back."""

    def __init__(self, dim: int, heads: int, *, seed=None, dtype=np.float64):
        if dim % heads:
            raise ValueError(f"SelfAttention: dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.q, self.k, self.v, self.out = (Linear(dim, dim, seed=_offset(seed, i), dtype=dtype) for i in range(4))

    def split_heads(self, x: Tensor) -> Tensor:  # (B, T, D) -> (B, heads, T, D / heads)
        B, T, D = x.shape
        return x.reshape(B, T, self.heads, D // self.heads).transpose(1, 2)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        B, T, D = x.shape
        heads = scaled_dot_product_attention(self.split_heads(self.q(x)), self.split_heads(self.k(x)),
                                             self.split_heads(self.v(x)), attn_mask=mask)
        return self.out(heads.transpose(1, 2).reshape(B, T, D))


class FeedForward(Module):
    """Linear → GELU → Linear, widening by ``expand`` in between."""

    def __init__(self, dim: int, expand: int = 4, *, seed=None, dtype=np.float64):
        self.up = Linear(dim, expand * dim, seed=seed, dtype=dtype)
        self.down = Linear(expand * dim, dim, seed=_offset(seed, 1), dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(gelu(self.up(x)))


class TransformerBlock(Module):
    """Pre-norm block: x + Attention(LN(x)), then + FeedForward(LN(·)).

    The two additions are the residual paths: each passes its incoming gradient straight
    through, whatever the sublayer beside it does.
    """

    def __init__(self, dim: int, heads: int, *, seed=None, dtype=np.float64):
        self.ln1, self.ln2 = LayerNorm(dim, dtype=dtype), LayerNorm(dim, dtype=dtype)
        self.attn = SelfAttention(dim, heads, seed=seed, dtype=dtype)
        self.ff = FeedForward(dim, seed=_offset(seed, 10), dtype=dtype)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.ff(self.ln2(x))
