"""Helpers that act on a model's gradients (``torch.nn.utils``)."""
from __future__ import annotations

import numpy as np

from ..engine.guard import refusable


@refusable("nn.clip_grad_norm_", "the engine's clip_grad_norm_")
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0) -> float:
    """Scale all gradients together so that their global norm is at most ``max_norm``.

    Returns the norm *before* clipping: the number to log and watch. Clipping hides a symptom
    (one huge step); it does not fix what made the gradient huge. (PyTorch returns the norm as a
    tensor; haaw as a float.) ``norm_type`` is p of the p-norm over every entry of every gradient,
    (Σ |g|ᵖ)^(1/p): 2 by default, ``float("inf")`` for the largest |g|, as in PyTorch.
    """
    if hasattr(parameters, "grad"):  # one tensor, as PyTorch accepts (iterating it would give its rows)
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"clip_grad_norm_: norm_type must be positive (2.0, 1.0, float('inf')), got {norm_type}")
    grads = [np.abs(p.grad.astype(np.float64)) for p in params]
    if norm_type == np.inf:
        total = max((float(g.max()) for g in grads if g.size), default=0.0)
    else:
        total = float(sum(float(np.sum(g**norm_type)) for g in grads) ** (1.0 / norm_type))
    if not total <= max_norm:  # also a nan norm: every gradient becomes nan, as in PyTorch, not left unclipped
        scale = max_norm / (total + 1e-6)
        for p in params:
            p.grad = p.grad * scale  # a new array: gradients are never changed in place
    return total
