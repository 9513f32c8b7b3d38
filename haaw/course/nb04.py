"""Deep stacks for notebook 04's explorer and its companion: plain, residual, residual + LayerNorm.

The core notebook builds its stacks in its own cells, to be read; these copies draw the same random
numbers in the same order, so that the explorer's sliders at the notebook's settings, and the companion's
closer looks (deeper/04_gradient_flow_deeper.ipynb), show the notebook's numbers. Each layer is
act(LN(h) W) (LN only when ``normalise``), added to h when ``residual``, with W drawn at ``init_scale``
times He's scale √(2/width) for ReLU, or the linear rule √(1/width) for tanh.
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


def stack(depth: int, init_scale: float = 1.0, *, activation: str = "relu", residual: bool = False,
          normalise: bool = False, width: int = 64, batch: int = 32, seed: int = 0) -> list[dict]:
    """The stack of notebook 04, after one backward pass: per layer, the tensors a closer look reads, each with
    its gradient: ``h`` (the layer's input), ``branch_input`` (LN(h), or h itself) and ``z`` (branch_input @ W)."""
    rng = np.random.default_rng(seed)
    h = Tensor(rng.standard_normal((batch, width)), requires_grad=True)
    std = init_scale * np.sqrt((2.0 if activation == "relu" else 1.0) / width)
    if residual:
        std /= np.sqrt(depth)
    layers = []
    for _ in range(depth):
        W = Tensor(rng.normal(0.0, std, (width, width)), requires_grad=True)
        branch_input = layer_norm(h, (width,)) if normalise else h
        z = branch_input @ W
        layers.append({"h": h, "branch_input": branch_input, "z": z})
        branch = z.relu() if activation == "relu" else z.tanh()
        h = h + branch if residual else branch
    upstream = rng.standard_normal((batch, width))  # a random dL/dh at the top
    (h * upstream).sum().backward()
    return layers


def grad_norms(layers: list[dict]) -> np.ndarray:
    """‖dL/dh‖ at the input of every layer of ``stack(...)``, first to last."""
    return np.array([np.linalg.norm(layer["h"].grad) for layer in layers])
