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


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh form: x · Φ(x) approximated as ½x(1 + tanh(√(2/π)(x + 0.044715x³))).

    Smooth where ReLU has a corner, and slightly negative for small negative x, so a unit is
    never completely dead. (PyTorch: ``gelu(x, approximate="tanh")``.)
    """
    inner = (x + x**3 * 0.044715) * float(np.sqrt(2 / np.pi))
    return x * (inner.tanh() + 1.0) * 0.5


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each row (last axis) to mean 0 and variance 1, then scale and shift.

    Built from the table's operations, so its backward needs no formula of its own: the chain
    rule through mean, subtraction, power and division is the layer-norm gradient.
    """
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    out = centred / (variance + eps) ** 0.5
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def causal_mask(length: int) -> np.ndarray:
    """True where position i may look at position j, that is j ≤ i (no peeking ahead)."""
    return np.tril(np.ones((length, length), dtype=bool))


def attention(q: Tensor, k: Tensor, v: Tensor, mask=None, scale: float | None = None,
              return_weights: bool = False):
    """Scaled dot-product attention: softmax(q kᵀ · scale) v, over the last two axes.

    ``mask`` (boolean, broadcastable to the scores' shape (..., queries, keys)): True means
    "may attend". ``scale`` defaults to 1/√d_k, which keeps the scores' variance near 1.
    A query whose row of the mask is all False gets output 0 and gradient 0, never NaN.
    """
    d_k = q.shape[-1]
    if k.shape[-1] != d_k:
        raise ValueError(f"attention: queries have {d_k} features but keys have {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: {k.shape[-2]} keys but {v.shape[-2]} values")
    scale = 1.0 / float(np.sqrt(d_k)) if scale is None else scale
    scores = (q @ k.swapaxes(-1, -2)) * scale
    if mask is None:
        weights = scores.softmax(-1)
    else:
        mask = np.asarray(mask, dtype=bool)
        try:
            mask = np.broadcast_to(mask, scores.shape)
        except ValueError:
            raise ValueError(f"attention: a mask of shape {mask.shape} does not fit scores of shape "
                             f"{scores.shape} (queries × keys)") from None
        weights = apply("masked_softmax", scores, mask=mask, axis=-1)
    out = weights @ v
    return (out, weights) if return_weights else out
