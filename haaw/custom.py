"""Your own differentiable operation: a forward and a backward, written by hand.

``custom_op(name, forward, backward)`` returns a function on Tensors. ``forward(*arrays)``
returns ``(out, saved)``; ``backward(g, saved)`` returns one gradient per input. Nothing checks
that the backward matches the forward, which is exactly why custom operations are where wrong
gradients hide: run ``gradcheck`` on every one of them.
"""
from __future__ import annotations

from .ops import Op, _elementwise
from .tensor import Tensor, apply


def custom_op(name: str, forward, backward):
    """A new operation usable like the built-in ones, recorded in the graph under ``name``."""

    def vjp(g, saved, needs):
        grads = backward(g, saved)
        grads = grads if isinstance(grads, tuple) else (grads,)
        if len(grads) != len(needs):
            raise ValueError(f"custom op '{name}': backward returned {len(grads)} gradient(s) "
                             f"for {len(needs)} input(s)")
        return tuple(grad if need else None for grad, need in zip(grads, needs))

    op = Op(name, forward, vjp, _elementwise)

    def apply_op(*inputs):
        return apply(op, *(t if isinstance(t, Tensor) else Tensor(t) for t in inputs))

    apply_op.__name__ = name
    return apply_op
