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

import numpy as np

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
            fn = _inputs_read_only(name, fn)
            active[name] = fn
            if name in _installers:
                undo.append(_installers[name](fn))
        yield
    finally:
        for restore in reversed(undo):
            restore()
        active.clear()
        active.update(previous)


def read_only(value, copy: bool = False):
    """A read-only view of an array (the array itself stays writable), or of a copy of it; also of the arrays
    inside a list or tuple; anything else as it is."""
    if isinstance(value, np.ndarray):
        view = value.copy() if copy else value.view()
        view.flags.writeable = False
        return view
    if isinstance(value, (list, tuple)) and any(isinstance(v, np.ndarray) for v in value):
        return type(value)(read_only(v, copy) for v in value)
    return value


def _inputs_read_only(name: str, fn):
    """``fn`` receiving read-only views of the engine's arrays: an in-place change of an input (``G *= ...``)
    is refused at its line instead of changing a gradient another operation still needs."""
    if isinstance(fn, type):  # a class (a custom Function): the engine calls its methods, not it
        return fn

    def guarded(*args, **kwargs):
        try:
            return fn(*map(read_only, args), **{k: read_only(v) for k, v in kwargs.items()})
        except ValueError as err:
            if "read-only" not in str(err):
                raise
            raise RuntimeError(f"your {getattr(fn, '__name__', name)} (in the engine's {name!r} slot) changed one "
                               "of its inputs in place: the engine hands it its own arrays, which other operations "
                               "still need. Make a new array (G = G * ...), not G *= ... or G[...] = ...") from err

    guarded.__name__ = getattr(fn, "__name__", name)
    guarded.__wrapped__ = fn
    return guarded


def swap(owner, attribute: str, replacement):
    """Set ``owner.attribute`` to ``replacement``; return a function that puts the old one back."""
    old = getattr(owner, attribute)
    setattr(owner, attribute, replacement)
    return lambda: setattr(owner, attribute, old)
