"""Y = XW: which matrices meet in each gradient, and the engine's agreement with the formulas.

Used by notebook 03's shape explorer and its tests: for any batch size B, input size n and
output size m, backward must give dL/dW = XᵀG, of W's shape (n, m), and dL/dX = GWᵀ, of X's
shape (B, n), where G = dL/dY has Y's shape (B, m).
"""
from __future__ import annotations

import numpy as np

from ..engine import Tensor


def matmul_gradients(B: int, n: int, m: int, seed: int = 0) -> dict:
    """Run Y = XW backward on random X, W, G; return the shapes and the formulas' agreement."""
    rng = np.random.default_rng(seed)
    X = Tensor(rng.standard_normal((B, n)), requires_grad=True)
    W = Tensor(rng.standard_normal((n, m)), requires_grad=True)
    G = rng.standard_normal((B, m))
    (X @ W).backward(G)
    return {
        "shapes": {"X": (B, n), "W": (n, m), "G": (B, m), "dW": W.grad.shape, "dX": X.grad.shape},
        "dW = XᵀG": float(np.max(np.abs(W.grad - X.data.T @ G))),
        "dX = GWᵀ": float(np.max(np.abs(X.grad - G @ W.data.T))),
        "flops": {"forward": 2 * B * n * m, "dW": 2 * n * B * m, "dX": 2 * B * m * n},
    }


def describe_matmul_gradients(B: int, n: int, m: int) -> str:
    r = matmul_gradients(B, n, m)
    s = r["shapes"]
    return "\n".join([
        f"forward : Y = X {s['X']} @ W {s['W']}  ->  Y {s['G']}",
        f"backward: dL/dW = Xᵀ {(n, B)} @ G {s['G']}  ->  {s['dW']}  (the shape of W; "
        f"the batch dimension B = {B} is summed away)",
        f"          dL/dX = G {s['G']} @ Wᵀ {(m, n)}  ->  {s['dX']}  (the shape of X)",
        f"engine vs formula: max |difference| {max(r['dW = XᵀG'], r['dX = GWᵀ']):.1e}",
        f"FLOPs: forward {r['flops']['forward']:,}, dW {r['flops']['dW']:,}, dX {r['flops']['dX']:,}",
    ])

