"""Measuring checkpointing on a deep stack: memory kept, work redone, time taken.

The stack is ``depth`` residual feed-forward blocks, h ← h + W₂ GELU(W₁ LN(h)), each of which
keeps several arrays for its backward. Checkpointing segments of ``segment`` blocks keeps only
each segment's input and recomputes the rest during backward.

What fills an accelerator's memory while a transformer trains: a calculator.

Per parameter: the weights, their gradients and the optimizer's state. In fp32 with Adam that
is 4 + 4 + 8 = 16 bytes. In mixed precision it is 2 (16-bit weights) + 2 (16-bit gradients) +
12 (fp32 master weights and Adam's two moments) = 16 bytes too (the accounting of the ZeRO paper,
Rajbhandari et al. 2019): mixed precision does not shrink this part, it shrinks the activations.

Activations per layer, in 16-bit, for sequence length s, batch b, hidden size h and a heads:
s·b·h·(34 + 5·a·s/h) bytes (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models"); fp32 doubles it. With full recomputation (checkpointing every layer) only
each layer's input is kept: 2·s·b·h bytes in 16-bit.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..engine import Tensor, checkpoint
from ..nn import Linear
from ..nn import functional as F
from ..tools.flops import count_flops
from ..tools.memory import track_memory


def make_stack(depth: int = 16, width: int = 64, seed: int = 0) -> tuple[list, list]:
    """``depth`` blocks, each a function h -> h + W₂ GELU(W₁ LN(h)), and the Linear layers they use."""
    blocks, layers = [], []
    for i in range(depth):
        up, down = Linear(width, 4 * width, seed=seed + 2 * i), Linear(4 * width, width, seed=seed + 2 * i + 1)
        blocks.append(lambda h, up=up, down=down: h + down(F.gelu(up(F.layer_norm(h, h.shape[-1:])))))
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


def describe_run(result: dict, baseline: dict) -> str:
    extra = result["recompute"] / (baseline["forward"] + baseline["backward"])
    return (f"peak saved {result['peak bytes'] / 2**20:6.2f} MiB ({result['peak bytes'] / baseline['peak bytes']:4.0%} "
            f"of no checkpointing), recomputed FLOPs +{extra:.0%} of a plain step")


@dataclass(frozen=True)
class TransformerShape:
    name: str
    params: float
    layers: int
    hidden: int
    heads: int


GPT_125M = TransformerShape("125M", 125e6, layers=12, hidden=768, heads=12)
MODEL_7B = TransformerShape("7B", 6.7e9, layers=32, hidden=4096, heads=32)

OPTIMIZER_STATE_BYTES = {"sgd": 0, "sgd+momentum": 4, "adam": 8}  # fp32 per parameter


def training_memory(model: TransformerShape, batch: int, seq: int, precision: str = "fp32",
                    optimizer: str = "adam", recompute: bool = False) -> dict:
    """Bytes per category: weights, gradients, optimizer state, activations."""
    if precision not in ("fp32", "mixed"):
        raise ValueError(f"precision must be 'fp32' or 'mixed', got {precision!r}")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_BYTES)}, got {optimizer!r}")
    P = model.params
    state = OPTIMIZER_STATE_BYTES[optimizer] * P
    if precision == "mixed":
        weights, grads, state = 2 * P, 2 * P, state + 4 * P  # + the fp32 master copy
    else:
        weights, grads = 4 * P, 4 * P
    s, b, h, a = seq, batch, model.hidden, model.heads
    per_layer = 2 * s * b * h if recompute else s * b * h * (34 + 5 * a * s / h)
    activations = model.layers * per_layer * (2 if precision == "fp32" else 1)
    return {"weights": weights, "gradients": grads, "optimizer state": state, "activations": activations}


def describe_budget(model: TransformerShape, batch: int, seq: int, **kwargs) -> str:
    parts = training_memory(model, batch, seq, **kwargs)
    total = sum(parts.values())
    body = ", ".join(f"{k} {v / 2**30:,.1f}" for k, v in parts.items())
    return f"{model.name}, batch {batch} × {seq} tokens, {kwargs}: {body}; total {total / 2**30:,.1f} GiB"
