"""Gradient checkpointing: forget a block's insides in the forward pass, recompute them in backward.

``checkpoint(fn, *inputs)`` runs ``fn`` without recording anything, so none of its intermediate
arrays are kept; only its inputs are saved. When backward reaches the output, ``fn`` is run
again, this time recording, and the gradient is pushed through that fresh graph. Memory falls to
one block's worth of activations at a time; the price is a second forward pass through ``fn``.
"""
from __future__ import annotations

from . import flops
from .ops import Op, _free
from .tensor import Tensor, no_grad, record


def checkpoint(fn, *inputs: Tensor) -> Tensor:
    """``fn(*inputs)``, with its activations recomputed during backward instead of stored."""
    inputs = tuple(t if isinstance(t, Tensor) else Tensor(t) for t in inputs)
    with no_grad():
        out = fn(*inputs)
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: fn must return a Tensor, got {type(out).__name__}")

    def recompute_vjp(g, saved, needs):
        fresh = [Tensor(t.data, requires_grad=need) for t, need in zip(inputs, needs)]
        with flops.recomputing():
            again = fn(*fresh)
        again.backward(g)  # parameters inside fn receive their gradients here
        return tuple(f.grad if need else None for f, need in zip(fresh, needs))

    needs = tuple(t.requires_grad for t in inputs)
    # fn may hold parameters, so the output needs a gradient even when no input does
    record(out, Op("checkpoint", None, recompute_vjp, _free), inputs, tuple(t.data for t in inputs), needs, {})
    return out
