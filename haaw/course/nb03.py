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
        f"flops: forward {r['flops']['forward']:,}, dW {r['flops']['dW']:,}, dX {r['flops']['dX']:,}",
    ])


def time_linear_layer(B: int, n: int, m: int, input_needs_grad: bool, reps: int = 15) -> tuple[float, float]:
    """Median seconds of Y = XW forward and of its backward, with or without a gradient for X."""
    import statistics
    import time

    rng = np.random.default_rng(0)
    X = Tensor(rng.standard_normal((B, n)).astype(np.float32), requires_grad=input_needs_grad)
    W = Tensor(rng.standard_normal((n, m)).astype(np.float32), requires_grad=True)
    G = rng.standard_normal((B, m)).astype(np.float32)
    forward, backward = [], []
    for _ in range(reps + 2):  # the first two warm up
        start = time.perf_counter()
        Y = X @ W
        middle = time.perf_counter()
        Y.backward(G)
        end = time.perf_counter()
        forward.append(middle - start)
        backward.append(end - middle)
    return statistics.median(forward[2:]), statistics.median(backward[2:])
