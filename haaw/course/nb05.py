"""Why attention divides its scores by √d_k, and what saturation does to softmax gradients.

With query and key entries of variance 1, a dot product over d_k dimensions has variance d_k:
the scores spread out as d_k grows, the softmax saturates (one weight near 1, the rest near 0)
and its gradient collapses. Dividing by √d_k brings the variance back to 1, whatever d_k is.
"""
from __future__ import annotations

import numpy as np

from ..engine.ops import OPS, Context

SOFTMAX = OPS["softmax"]


def score_variance(d_k: int, scaled: bool, samples: int = 4000, seed: int = 0) -> float:
    """Variance of q·k (times 1/√d_k if ``scaled``) for random unit-variance q and k."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, samples, d_k))
    scores = np.sum(q * k, axis=1) / (np.sqrt(d_k) if scaled else 1.0)
    return float(scores.var())


def softmax_gradient_norm(logits: np.ndarray, samples: int = 200, seed: int = 0) -> float:
    """Average ‖dL/d(logits)‖ through a softmax, over random unit upstream gradients."""
    rng = np.random.default_rng(seed)
    ctx = Context()
    SOFTMAX.forward(ctx, logits)  # keeps the output s on ctx, as the engine's forward does
    (vjp,) = SOFTMAX.vjps
    norms = [np.linalg.norm(vjp(ctx, g / np.linalg.norm(g))) for g in rng.standard_normal((samples, logits.size))]
    return float(np.mean(norms))


def attention_row(d_k: int, scaled: bool = True, temperature: float = 1.0, keys: int = 16, seed: int = 0) -> dict:
    """One query against ``keys`` random keys: weights, entropy, and the softmax's gradient norm."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d_k), rng.standard_normal((keys, d_k))
    scores = (k @ q) / (np.sqrt(d_k) if scaled else 1.0) / temperature
    weights = SOFTMAX.forward(Context(), scores)
    entropy = float(-np.sum(weights * np.log(np.maximum(weights, 1e-300))))
    return {"scores": scores, "weights": weights, "entropy": entropy, "max weight": float(weights.max()),
            "gradient norm": softmax_gradient_norm(scores)}


def describe_attention_row(d_k: int, scaled: bool = True, temperature: float = 1.0) -> str:
    row = attention_row(d_k, scaled, temperature)
    return (f"d_k = {d_k}, {'scaled by 1/√d_k' if scaled else 'not scaled'}, temperature {temperature:g}: "
            f"score std {row['scores'].std():.2f}, largest weight {row['max weight']:.3f}, "
            f"entropy {row['entropy']:.2f} (uniform: {np.log(16):.2f}), "
            f"softmax gradient norm {row['gradient norm']:.2e}")
