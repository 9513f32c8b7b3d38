"""Where instruments plug into the engine, so that the engine imports none of them.

The FLOP counter, the memory tracker and the like live in ``haaw.tools``. While one is active (``registered``)
its function is among the engine's hooks, and the engine calls every hook it finds. The hooks and the
recomputation mode are context variables, as the engine's other modes are: an instrument active in a running
cell does not count the work of an explorer's callback running in another context, or of another thread.
With nothing registered a hook costs the engine one look at an empty tuple.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

# "forward": fn(op, ctx, inputs, out): an operation has run forward. ``ctx`` is its Context when the
# operation was recorded for backward, None when it was not (no input needs a gradient).
# "backward": fn(node): ``node`` has passed its gradient on to its inputs (its saved values are used up).
_hooks = {"forward": ContextVar("haaw_forward_hooks", default=()),
          "backward": ContextVar("haaw_backward_hooks", default=())}
_recomputing: ContextVar[bool] = ContextVar("haaw_recomputing", default=False)


def on_forward() -> tuple:
    return _hooks["forward"].get()


def on_backward() -> tuple:
    return _hooks["backward"].get()


def recomputing() -> bool:
    """True while checkpointing runs a forward pass again inside backward."""
    return _recomputing.get()


@contextmanager
def recompute():
    """Mark the forward work done inside the block as recomputation (checkpointing)."""
    token = _recomputing.set(True)
    try:
        yield
    finally:
        _recomputing.reset(token)


@contextmanager
def registered(when: str, fn):
    """Call ``fn`` from the engine's ``when`` hooks ("forward" or "backward") inside the block."""
    hooks = _hooks[when]
    token = hooks.set((*hooks.get(), fn))
    try:
        yield
    finally:
        hooks.reset(token)
