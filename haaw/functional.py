"""Functions on tensors that are not methods: the ones a model's last layers need."""
from __future__ import annotations

import numpy as np

from .tensor import Tensor, apply, concatenate  # noqa: F401  (concatenate is re-exported)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along ``axis``, computed after subtracting the max (no overflow)."""
    return x.softmax(axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """log(softmax(x)), computed directly so that tiny probabilities do not become log(0)."""
    return x.log_softmax(axis)


def cross_entropy(logits: Tensor, targets, mask=None, reduction: str = "mean") -> Tensor:
    """The negative log-probability of each target class, averaged or summed.

    ``logits`` has shape (..., classes), ``targets`` integer class ids of shape (...).
    ``mask`` (same shape as ``targets``, 1 = counts, 0 = padding) removes entries *before*
    the reduction, so "mean" divides by the number of real entries, not by the padded size.
    ``reduction``: "mean", "sum" or "none" (one loss per entry).
    """
    if not isinstance(logits, Tensor):
        raise TypeError(f"cross_entropy: logits must be a Tensor, got {type(logits).__name__}")
    targets = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class ids, got dtype {targets.dtype}")
    if logits.ndim < 1 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} do not match logits of shape "
                         f"{logits.shape}: expected targets of shape {logits.shape[:-1]}")
    classes = logits.shape[-1]
    if targets.size and (targets.min() < 0 or targets.max() >= classes):
        raise ValueError(f"cross_entropy: targets must lie in [0, {classes - 1}]; "
                         f"got values from {targets.min()} to {targets.max()}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    rows = logits.reshape(-1, classes) if logits.ndim != 2 else logits
    losses = apply("cross_entropy_rows", rows, targets=targets.reshape(-1))
    if mask is not None:
        mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
        if mask.shape != targets.shape:
            raise ValueError(f"cross_entropy: mask of shape {mask.shape} must match targets {targets.shape}")
        losses = losses * mask.reshape(-1).astype(logits.dtype)
    if reduction == "none":
        return losses.reshape(targets.shape)
    total = losses.sum()
    if reduction == "sum":
        return total
    count = targets.size if mask is None else float(np.sum(mask))
    if count == 0:
        raise ValueError("cross_entropy: the mask removes every entry, so there is nothing to average")
    return total / count
