"""Deep stacks for the gradient-flow explorer: plain, residual, residual + LayerNorm.

Notebook 04 builds the same stacks in its own cells (its ``stack`` function); this copy is the
explorer's plumbing, drawing the same random numbers in the same order, so that a slider set to
the notebook's settings shows the notebook's numbers. Each layer is ReLU(LN(h) W) (LN only when
``normalise``) with W drawn at ``init_scale`` times He's scale √(2/width).
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

