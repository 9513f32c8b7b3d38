"""Watching gradients flow: the gradient norm that reaches chosen tensors in one backward pass.

After ``backward()`` every tensor of the graph holds dL/d(itself) in ``.grad`` (an
intermediate's grad is the adjoint of the latest pass), so recording is only a matter of
remembering which tensors to look at: ``watch`` them during the forward pass, read the norms
after the backward pass.
"""
from __future__ import annotations

import numpy as np


class GradientRecorder:
    def __init__(self):
        self.watched: dict = {}

    def watch(self, name: str, tensor):
        """Remember ``tensor`` under ``name``; returns it, so it can wrap an expression."""
        self.watched[name] = tensor
        return tensor

    def norms(self) -> dict:
        """name -> ‖dL/d(tensor)‖ for every watched tensor (0 where no gradient arrived)."""
        return {name: _norm(t.grad) for name, t in self.watched.items()}


def parameter_grad_norms(module) -> dict:
    """label-or-index -> ‖gradient‖ for each parameter of ``module``."""
    return {f"{i}:{p.label or tuple(p.shape)}": _norm(p.grad) for i, p in enumerate(module.parameters())}


def _norm(grad) -> float:
    return 0.0 if grad is None else float(np.sqrt(np.sum(np.asarray(grad, dtype=np.float64) ** 2)))
