"""Your code in place of the engine's: ``with haaw.use(linear=my_linear_backward): ...``.

The course has you write pieces of the engine yourself (a local derivative, backward, a
vector-Jacobian product, an optimizer step) and then run real training on them. Each piece has a
named *slot*; inside ``use(...)`` the engine calls your function there instead of its own, and
afterwards everything is as it was. ``SLOTS`` lists every slot with what your function receives and
returns. The engine still checks what your code returns: a gradient of the wrong shape is refused
with the name of the operation, never silently used.
"""
from __future__ import annotations

from contextlib import contextmanager

SLOTS: dict[str, str] = {}  # slot name -> what the function receives and returns
_installers: dict = {}  # slot name -> install(fn), returning a function that undoes it
active: dict = {}  # slot name -> the function in use right now (read where a slot is consulted)


def slot(name: str, signature: str, install=None) -> None:
    """Declare a slot. ``install(fn)`` puts ``fn`` in place and returns an undo function; without
    one, the code at the slot reads ``active`` itself."""
    SLOTS[name] = signature
    if install is not None:
        _installers[name] = install


@contextmanager
def use(**implementations):
    """Run the block with your functions in the engine's slots (``use(tanh=my_tanh_backward)``)."""
    unknown = sorted(set(implementations) - set(SLOTS))
    if unknown:
        known = "; ".join(f"{name}: {sig}" for name, sig in sorted(SLOTS.items()))
        raise TypeError(f"use(): no slot called {', '.join(map(repr, unknown))}. The slots are: {known}")
    for name, fn in implementations.items():
        if not callable(fn):
            raise TypeError(f"use({name}=...) needs a function ({SLOTS[name]}), got {type(fn).__name__} {fn!r:.40}")
    undo, previous = [], dict(active)
    try:
        for name, fn in implementations.items():
            active[name] = fn
            if name in _installers:
                undo.append(_installers[name](fn))
        yield
    finally:
        for restore in reversed(undo):
            restore()
        active.clear()
        active.update(previous)


def swap(owner, attribute: str, replacement):
    """Set ``owner.attribute`` to ``replacement``; return a function that puts the old one back."""
    old = getattr(owner, attribute)
    setattr(owner, attribute, replacement)
    return lambda: setattr(owner, attribute, old)
