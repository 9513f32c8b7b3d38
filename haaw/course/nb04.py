"""Deep stacks for watching gradients flow: plain, residual, residual + LayerNorm.

Each layer is ReLU(LN(h) W + b) with W drawn at ``init_scale`` times He's scale √(2/width),
the scale at which a plain ReLU layer keeps the signal's size on average. Below it, every
layer shrinks the gradient by about that factor, above it every layer grows it, so depth turns
a small factor into a huge one: 0.9⁵⁰ ≈ 0.005, 1.1⁵⁰ ≈ 117.
"""
from __future__ import annotations

import numpy as np

from ..nn.functional import layer_norm
from ..tools.recorder import GradientRecorder
from ..engine import Tensor


def deep_stack_grad_norms(depth: int = 50, *, width: int = 64, init_scale: float = 1.0, residual: bool = False,
                          normalise: bool = False, batch: int = 32, seed: int = 0) -> np.ndarray:
    """‖dL/d(input of layer l)‖ for l = 0 … depth−1 after one backward pass (L = Σ h·u, u random)."""
    rng = np.random.default_rng(seed)
    h = Tensor(rng.standard_normal((batch, width)), requires_grad=True)
    recorder = GradientRecorder()
    std = init_scale * np.sqrt(2.0 / width)
    if residual:  # each branch adds to the stream: scale it down so the sum does not grow with depth
        std /= np.sqrt(depth)
    for layer in range(depth):
        recorder.watch(layer, h)
        W = Tensor(rng.normal(0.0, std, (width, width)), requires_grad=True)
        branch = ((layer_norm(h, h.shape[-1:]) if normalise else h) @ W).relu()
        h = h + branch if residual else branch
    upstream = rng.standard_normal((batch, width))
    (h * upstream).sum().backward()
    return np.array(list(recorder.norms().values()))


def residual_factor(branch_scale: float = 1e-6, seed: int = 0) -> dict:
    """dL/dx through y = F(x) and through y = x + F(x), where F's own derivative is ~branch_scale."""
    rng = np.random.default_rng(seed)
    x0, W = rng.standard_normal((4, 8)), rng.standard_normal((8, 8)) * branch_scale
    G = rng.standard_normal((4, 8))
    result = {}
    for name, residual in (("plain y = F(x)", False), ("residual y = x + F(x)", True)):
        x = Tensor(x0, requires_grad=True)
        branch = (x @ Tensor(W)).tanh()
        (x + branch if residual else branch).backward(G)
        result[name] = float(np.linalg.norm(x.grad) / np.linalg.norm(G))
    return result
