"""What fills an accelerator's memory while a transformer trains: a calculator.

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

from dataclasses import dataclass


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


def describe(model: TransformerShape, batch: int, seq: int, **kwargs) -> str:
    parts = training_memory(model, batch, seq, **kwargs)
    total = sum(parts.values())
    body = ", ".join(f"{k} {v / 2**30:,.1f}" for k, v in parts.items())
    return f"{model.name}, batch {batch} × {seq} tokens, {kwargs}: {body}; total {total / 2**30:,.1f} GiB"
