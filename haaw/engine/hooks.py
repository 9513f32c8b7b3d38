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
# saved_tensors_hooks: the (pack, unpack) pair every saved array passes through, or None
_saved_hooks = ContextVar("haaw_saved_tensors_hooks", default=None)
# selective checkpointing: (names of operations whose results are kept, the kept results, "keep" or "reuse")
_selective = ContextVar("haaw_selective", default=None)
_reused: ContextVar[bool] = ContextVar("haaw_reused", default=False)


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


def reused() -> bool:
    """True while the engine's hooks hear of an operation whose result selective checkpointing kept from the forward
    pass instead of computing it again (no FLOPs were spent on it)."""
    return _reused.get()


@contextmanager
def marked_reused():
    token = _reused.set(True)
    try:
        yield
    finally:
        _reused.reset(token)


def selective():
    return _selective.get()


@contextmanager
def selecting(names, kept: list, mode: str):
    """Inside the block, the results of the operations named in ``names`` are appended to ``kept`` (mode "keep") or
    taken from its front instead of being computed (mode "reuse")."""
    token = _selective.set((frozenset(names), kept, mode))
    try:
        yield
    finally:
        _selective.reset(token)


class Packed:
    """A saved array as ``pack`` returned it, and the ``unpack`` that brings it back when backward needs it."""

    __slots__ = ("packed", "unpack")

    def __init__(self, packed, unpack):
        self.packed, self.unpack = packed, unpack


def saved_pair():
    return _saved_hooks.get()


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack, unpack):`` every array an operation recorded inside the block saves for its
    backward is replaced by ``pack(array)``; when backward reaches the operation, ``unpack(packed)`` must give the
    array back. As PyTorch's ``torch.autograd.graph.saved_tensors_hooks``; offloading saved arrays to the host
    (the CPU's memory) and compressing them are written with it."""

    def __init__(self, pack_hook, unpack_hook):
        self.pair, self._tokens = (pack_hook, unpack_hook), []

    def __enter__(self):
        self._tokens.append(_saved_hooks.set(self.pair))
        return self

    def __exit__(self, *exc):
        _saved_hooks.reset(self._tokens.pop())
