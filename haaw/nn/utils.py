"""Helpers that act on a model's gradients (``torch.nn.utils``)."""
from __future__ import annotations

import numpy as np

from ..engine.guard import refusable


@refusable("nn.clip_grad_norm_", "the engine's clip_grad_norm_")
def clip_grad_norm_(parameters, max_norm: float) -> float:
    """Scale all gradients together so that their global norm is at most ``max_norm``.

    Returns the norm *before* clipping: the number to log and watch. Clipping hides a symptom
    (one huge step); it does not fix what made the gradient huge. (PyTorch returns the norm as a
    tensor; haaw as a float.)
    """
    if hasattr(parameters, "grad"):  # one tensor, as PyTorch accepts (iterating it would give its rows)
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    total = float(np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in params)))
    if not total <= max_norm:  # also a nan norm: every gradient becomes nan, as in PyTorch, not left unclipped
        scale = max_norm / (total + 1e-6)
        for p in params:
            p.grad = p.grad * scale  # a new array: gradients are never changed in place
    return total
