"""Plumbing for notebook 06: a memory calculator for real transformers, and the explorer's stack.

What fills an accelerator's memory while a transformer trains. Per parameter: the weights, their
gradients and the optimizer's state. In fp32 with Adam that is 4 + 4 + 8 = 16 bytes. In mixed
precision it is 2 (16-bit weights) + 2 (16-bit gradients) + 12 (fp32 master weights and Adam's two
moments) = 16 bytes too (the accounting of the ZeRO paper, Rajbhandari et al. 2020): mixed precision
does not shrink this part, it shrinks the activations.

Activations per layer, in 16-bit, for sequence length s, batch b, hidden size h and a heads:
s·b·h·(34 + 5·a·s/h) bytes (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", who count what each step of a layer keeps: 34·s·b·h for the arrays the size
of the hidden state, 5·a·s²·b for the attention scores, their softmax and dropout). Of those bytes,
the dropout masks take one byte a number in any precision; in fp32 the other numbers take 4 bytes
instead of 2, which gives s·b·h·(66 + 9·a·s/h). A kernel that keeps no score matrix
(FlashAttention-style) drops the second term. With full recomputation (checkpointing every layer)
each layer's input stays (one number per entry of the hidden state), and while one layer is
recomputed during backward its own activations exist again.

That count is for the layer Korthikanti et al. studied, GPT-3's: dropout after the attention scores, after
attention and after the feed-forward network, and a feed-forward network of two matrices with GELU between
them, 4h wide. Open 7B models of recent years (LLaMA's, for one) train without dropout and use SwiGLU, three
matrices and a gated product, W₂(SiLU(W₁x) ⊙ W₃x), of width f (11008 for LLaMA-7B, about 8h/3). Counted the
same way, what each step keeps: the two norms 2, attention 5 (as before, without the mask), the feed-forward
network 1 + 4·f/h (its input; W₁x, W₃x, SiLU's output and their product, f wide each) numbers the size of
the hidden state, and one s × s matrix per head (the softmax's output): s·b·h·(2·(7 + 1 + 4·f/h) + 2·a·s/h)
bytes in 16-bit, which ``TransformerShape(mlp="swiglu", dropout=False)`` selects.

Only the transformer layers are counted: not the embeddings, nor the output layer's logits and the
loss, nor temporaries.

The checkpointing experiment itself is written in the core notebook, where the learner can change it;
``make_stack``, ``run_stack`` and ``measure`` here are the same experiment, for the explorer when it is not
handed the notebook's own and for the companion notebook, which takes the experiment further.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass

import numpy as np

from ..engine import Tensor, checkpoint
from ..nn import Linear
from ..nn import functional as F
from ..tools.flops import count_flops
from ..tools.memory import track_memory


def make_stack(depth: int = 16, width: int = 64, seed: int = 0):
    """``depth`` residual feed-forward blocks, each a function h -> h + W₂ GELU(W₁ LN(h)), and the
    Linear layers they use (the hidden layer is 4 × ``width`` wide)."""
    blocks, layers = [], []
    for i in range(depth):
        up, down = Linear(width, 4 * width, seed=seed + 2 * i), Linear(4 * width, width, seed=seed + 2 * i + 1)
        blocks.append(lambda h, up=up, down=down: h + down(F.gelu(up(F.layer_norm(h, h.shape[-1:])))))
        layers += [up, down]
    return blocks, layers


def run_segment(h, chunk):
    """The blocks of ``chunk``, one after another."""
    for block in chunk:
        h = block(h)
    return h


def run_stack(blocks, x0: np.ndarray, segment: int | None = None, keep=checkpoint) -> Tensor:
    """One training step through ``blocks``, forward and backward, on the loss mean(h²): segments of
    ``segment`` blocks run as ``keep(fn, h)`` (None: no checkpointing). Returns the input, with its .grad."""
    size = segment or len(blocks)
    x = h = Tensor(x0, requires_grad=True)
    for start in range(0, len(blocks), size):
        chunk = blocks[start:start + size]
        h = run_segment(h, chunk) if segment is None else keep(lambda t, chunk=chunk: run_segment(t, chunk), h)
    (h * h).mean().backward()
    return x


def measure(segment: int | None, depth: int = 16, width: int = 64, batch: int = 64) -> dict:
    """The explorer's stand-in for the notebook's ``measure``: one step of ``make_stack``, checkpointed
    in segments of ``segment`` blocks (None: not at all); peak saved bytes, FLOPs (forward, backward,
    recomputed) and the live-bytes timeline."""
    blocks, _ = make_stack(depth, width)
    x0 = np.random.default_rng(1).standard_normal((batch, width))
    with track_memory() as memory, count_flops() as flops:
        run_stack(blocks, x0, segment)
    return {"peak bytes": memory.peak, "forward": flops.total_forward, "backward": flops.total_backward,
            "recompute": flops.total_recompute, "timeline": [live for _, _, live in memory.timeline]}


def time_in_turns(runs: dict, turns: int = 15) -> dict:
    """Name -> the seconds of each of ``turns`` runs of ``runs[name]()``, in CPU time of this thread.

    Each runs once first, unmeasured (a first run allocates its memory afresh); then the runs take turns,
    so that whatever slows the machine for a while slows them all. CPU time (``time.thread_time``) leaves
    out the time this thread waits while other programs run, though not how they slow it down (sharing
    the caches, for one). Garbage collection is off while timing, as ``timeit`` does. The caller sets the
    number of BLAS threads (the notebooks use one)."""
    for run in runs.values():
        run()
    times = {name: [] for name in runs}
    gc.collect()
    gc.disable()
    try:
        for _ in range(turns):
            for name, run in runs.items():
                start = time.thread_time()
                run()
                times[name].append(time.thread_time() - start)
    finally:
        gc.enable()
    return times


def describe_run(result: dict, baseline: dict) -> str:
    """One line: the peak of saved bytes against no checkpointing, and the recomputed FLOPs."""
    extra = result["recompute"] / (baseline["forward"] + baseline["backward"])
    return (f"peak saved {result['peak bytes'] / 2**20:6.2f} MiB ({result['peak bytes'] / baseline['peak bytes']:4.0%} "
            f"of no checkpointing), recomputed FLOPs +{extra:.0%} of a plain step")


@dataclass(frozen=True)
class TransformerShape:
    """A transformer's sizes, and the layer's kind: GPT's (dropout, a GELU feed-forward network 4h wide) by
    default, or ``mlp="swiglu"`` with ``ffn`` its width and ``dropout=False``, as LLaMA's."""
    name: str
    params: float
    layers: int
    hidden: int
    heads: int
    mlp: str = "gelu"
    ffn: int | None = None  # the feed-forward network's width; None: 4 × hidden
    dropout: bool = True


GPT_125M = TransformerShape("125M", 125e6, layers=12, hidden=768, heads=12)
MODEL_7B = TransformerShape("GPT-3 6.7B", 6.7e9, layers=32, hidden=4096, heads=32)  # GPT-3 6.7B's shape
LLAMA_7B = TransformerShape("LLaMA-style 7B", 6.74e9, layers=32, hidden=4096, heads=32, mlp="swiglu", ffn=11008,
                            dropout=False)

OPTIMIZER_STATE_BYTES = {"sgd": 0, "sgd+momentum": 4, "adam": 8}  # fp32 per parameter


def training_memory(model: TransformerShape, batch: int, seq: int, precision: str = "fp32",
                    optimizer: str = "adam", recompute: bool = False, keep_scores: bool = True) -> dict:
    """Bytes per category: weights, gradients, optimizer state, activations, and the layer being
    recomputed (0 without recomputation).

    ``recompute``: every layer checkpointed, so "activations" holds each layer's input; at the peak
    of backward the last layer is being recomputed, and its activations (less its input, which is
    already counted) exist again. ``keep_scores=False``: an attention kernel that stores no s × s
    score matrix (FlashAttention-style), so the 5·a·s/h term is dropped.
    """
    if precision not in ("fp32", "mixed"):
        raise ValueError(f"precision must be 'fp32' or 'mixed', got {precision!r}")
    if optimizer not in OPTIMIZER_STATE_BYTES:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_BYTES)}, got {optimizer!r}")
    if model.mlp not in ("gelu", "swiglu"):
        raise ValueError(f"mlp must be 'gelu' or 'swiglu', got {model.mlp!r}")
    P = model.params
    state = OPTIMIZER_STATE_BYTES[optimizer] * P
    if precision == "mixed":
        weights, grads, state = 2 * P, 2 * P, state + 4 * P  # + the fp32 master copy
    else:
        weights, grads = 4 * P, 4 * P
    s, b, h, a = seq, batch, model.hidden, model.heads
    w = 4 if precision == "fp32" else 2  # bytes a number; a dropout mask takes 1 byte a number in both
    f = model.ffn or 4 * h
    # the arrays the size of the hidden state, in numbers: the two norms' inputs (2); attention's Q, K, V
    # projection input, Q and K, V, the output projection's input (5); the feed-forward network's input and its
    # f-wide arrays: GELU's input and the second matrix's input (2), or SwiGLU's W₁x, W₃x, SiLU(W₁x), product (4)
    numbers = 2 + 5 + 1 + (4 if model.mlp == "swiglu" else 2) * f / h
    masks = 2 if model.dropout else 0  # after attention and after the feed-forward network
    # per score entry: the softmax's output, and with dropout its mask and its output
    score_part = ((2 * w + 1) if model.dropout else w) * a * s / h if keep_scores else 0
    one_layer = s * b * h * (numbers * w + masks + score_part)  # GPT's: 34 + 5·a·s/h in 16-bit, 66 + 9·a·s/h in fp32
    layer_input = w * s * b * h
    if recompute:
        activations, again = model.layers * layer_input, one_layer - layer_input
    else:
        activations, again = model.layers * one_layer, 0
    return {"weights": weights, "gradients": grads, "optimizer state": state,
            "activations": activations, "recomputed layer": again}


def describe_budget(model: TransformerShape, batch: int, seq: int, **kwargs) -> str:
    parts = training_memory(model, batch, seq, **kwargs)
    total = sum(parts.values())
    body = ", ".join(f"{k} {v / 2**30:,.1f}" for k, v in parts.items())
    return f"{model.name}, batch {batch} × {seq} tokens, {kwargs}: {body}; total {total / 2**30:,.1f} GiB"
