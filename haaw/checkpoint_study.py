"""Measuring checkpointing on a deep stack: memory kept, work redone, time taken.

The stack is ``depth`` residual feed-forward blocks, h ← h + W₂ GELU(W₁ LN(h)), each of which
keeps several arrays for its backward. Checkpointing segments of ``segment`` blocks keeps only
each segment's input and recomputes the rest during backward.
"""
from __future__ import annotations

import time

import numpy as np

from . import functional as F
from .checkpoint import checkpoint
from .flops import count_flops
from .memory import track_memory
from .nn import Linear
from .tensor import Tensor


def make_stack(depth: int = 16, width: int = 64, seed: int = 0) -> tuple[list, list]:
    """``depth`` blocks, each a function h -> h + W₂ GELU(W₁ LN(h)), and the Linear layers they use."""
    blocks, layers = [], []
    for i in range(depth):
        up, down = Linear(width, 4 * width, seed=seed + 2 * i), Linear(4 * width, width, seed=seed + 2 * i + 1)
        blocks.append(lambda h, up=up, down=down: h + down(F.gelu(up(F.layer_norm(h)))))
        layers += [up, down]
    return blocks, layers


def run_stack(blocks, x0: np.ndarray, segment: int | None) -> Tensor:
    """Forward and backward through ``blocks``; ``segment`` None means no checkpointing."""
    h = x = Tensor(x0, requires_grad=True)
    if segment is None:
        for block in blocks:
            h = block(h)
    else:
        for start in range(0, len(blocks), segment):
            def run_segment(t, chunk=blocks[start:start + segment]):
                for block in chunk:
                    t = block(t)
                return t
            h = checkpoint(run_segment, h)
    (h * h).mean().backward()
    return x


def measure(depth: int = 16, width: int = 64, batch: int = 64, segment: int | None = None,
            repeats: int = 5) -> dict:
    """Peak saved bytes, FLOPs (forward, backward, recomputed), the live-bytes timeline, and the
    median seconds of one step over ``repeats`` runs (None when ``repeats`` is 0)."""
    blocks, _ = make_stack(depth, width)
    x0 = np.random.default_rng(1).standard_normal((batch, width))
    with track_memory() as memory, count_flops() as counter:
        run_stack(blocks, x0, segment)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_stack(blocks, x0, segment)
        seconds.append(time.perf_counter() - start)
    return {"peak bytes": memory.peak, "forward": counter.total_forward, "backward": counter.total_backward,
            "recompute": counter.total_recompute, "timeline": [live for _, _, live in memory.timeline],
            "seconds": float(np.median(seconds)) if seconds else None}


def describe(result: dict, baseline: dict) -> str:
    extra = result["recompute"] / (baseline["forward"] + baseline["backward"])
    return (f"peak saved {result['peak bytes'] / 2**20:6.2f} MiB ({result['peak bytes'] / baseline['peak bytes']:4.0%} "
            f"of no checkpointing), recomputed FLOPs +{extra:.0%} of a plain step")
