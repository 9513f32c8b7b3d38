"""Where instruments plug into the engine, so that the engine imports none of them.

The FLOP counter, the memory tracker and the like live in ``haaw.tools``. While one is active it
puts a function in one of these lists, and the engine calls whatever it finds there. With nothing
registered a hook costs the engine one test of an empty list.
"""
from __future__ import annotations

from contextlib import contextmanager

# fn(op, ctx, inputs, out): an operation has run forward. ``ctx`` is its Context when the
# operation was recorded for backward, None when it was not (no input needs a gradient).
on_forward: list = []
# fn(node): ``node`` has passed its gradient on to its inputs (its saved values are used up).
on_backward: list = []

_recomputing = [False]


def recomputing() -> bool:
    """True while checkpointing runs a forward pass again inside backward."""
    return _recomputing[0]


@contextmanager
def recompute():
    """Mark the forward work done inside the block as recomputation (checkpointing)."""
    previous, _recomputing[0] = _recomputing[0], True
    try:
        yield
    finally:
        _recomputing[0] = previous


@contextmanager
def registered(hooks: list, fn):
    """Call ``fn`` from ``hooks`` inside the block."""
    hooks.append(fn)
    try:
        yield
    finally:
        hooks.remove(fn)
