"""Your code in place of the engine's: ``with haaw.use(linear=my_linear_backward): ...``.

The course has you write pieces of the engine yourself (a local derivative, backward, a
vector-Jacobian product, an optimizer step) and then run real training on them. Each piece has a
named *slot*, declared once (``slot``) beside the engine code that consults it; there the engine asks
``override(name)`` and calls your function if one is in use, its own code otherwise. Inside ``use(...)``
your functions are in use; afterwards everything is as it was. One rule holds for every slot: the function in
use when an operation's forward pass ran is the one its backward calls (a graph built inside ``use()`` runs
your backward even when ``.backward()`` is called after the block, and one built outside never does). ``SLOTS`` lists every slot with what your
function receives and returns. The engine still checks what your code returns: a gradient of the wrong
shape is refused with the name of the operation, never silently used.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

import numpy as np

from . import guard


@dataclass(frozen=True)
class Slot:
    """A place where the engine can run your function instead of its own code."""

    name: str
    signature: str  # what your function receives and returns, as the learner writes it
    adapter: Callable  # your function -> what the engine's call site calls (the same arguments, or fewer)
    refuses: tuple = ()  # besides the engine's backward, what your function may not call: what the slot replaces


SLOTS: dict[str, Slot] = {}  # every slot, declared once, beside the engine code that consults it
# The functions in use: slot name -> (your function, its adapted form). A context variable, so a block open
# in one context (a running cell) does not reach code running in another (an explorer's callback).
_in_use: ContextVar[Mapping] = ContextVar("haaw_slots_in_use", default=MappingProxyType({}))  # never changed in place
# slot name -> the adapted form alone, set and reset with _in_use: what the call sites read. A plain dict (never
# changed in place either: use() sets a new one), because every scalar operation reads it and dict.get is fastest.
_calls: ContextVar[dict] = ContextVar("haaw_slot_calls", default={})  # noqa: B039 (never changed in place)


def slot(name: str, signature: str, adapter: Callable = lambda fn: fn, refuses: tuple = ()) -> None:
    """Declare a slot: ``adapter(fn)`` is what the engine's call site will call in place of its own code. While
    your function runs there, the engine's backward and what ``refuses`` names refuse to run (guard.py). A module
    reloaded (``importlib.reload``, IPython's autoreload) declares its slots again, which replaces them."""
    SLOTS[name] = Slot(name, signature, adapter, refuses)


def override(name: str):
    """The one lookup every call site makes: the adapted function in the slot ``name``, or None (the
    engine's own code runs)."""
    return _calls.get().get(name)


# ``overrides().get(name)`` is ``override(name)`` without a Python call of its own: the scalar engine's operations,
# which ask once each, read the slots this way (``override``'s own call was a seventh of a scalar forward pass)
overrides = _calls.get


def snapshot() -> tuple:
    """The slots filled right now (your functions, and what the call sites read), never changed in place: an
    operation keeps it at its forward pass."""
    return _in_use.get(), _calls.get()


@contextmanager
def as_at(filled: tuple):
    """Run the block with the slots as they were when ``filled`` was taken (``snapshot``): the one rule of the
    slots is that the function in use when an operation's forward ran is the one its backward calls."""
    functions, calls = filled
    if functions is _in_use.get() and calls is _calls.get():
        yield
        return
    token, calls_token = _in_use.set(functions), _calls.set(calls)
    try:
        yield
    finally:
        _calls.reset(calls_token)
        _in_use.reset(token)


def in_use() -> dict:
    """Slot name -> the function you put there, for the slots filled right now."""
    return {name: fn for name, (fn, _) in _in_use.get().items()}


@contextmanager
def use(**implementations):
    """Run the block with your functions in the engine's slots (``use(tanh=my_tanh_backward)``)."""
    unknown = sorted(set(implementations) - set(SLOTS))
    if unknown:
        known = "; ".join(f"{name}: {s.signature}" for name, s in sorted(SLOTS.items()))
        raise TypeError(f"use(): no slot called {', '.join(map(repr, unknown))}. The slots are: {known}")
    for name, fn in implementations.items():
        if not callable(fn):
            raise TypeError(f"use({name}=...) needs a function ({SLOTS[name].signature}), got "
                            f"{type(fn).__name__} {fn!r:.40}")
    filled = {name: (fn, SLOTS[name].adapter(_inputs_read_only(name, fn))) for name, fn in implementations.items()}
    token = _in_use.set({**_in_use.get(), **filled})
    calls = _calls.set({**_calls.get(), **{name: adapted for name, (_, adapted) in filled.items()}})
    try:
        yield
    finally:
        _calls.reset(calls)
        _in_use.reset(token)


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

    refused = (*guard.BACKWARD, *SLOTS[name].refuses)

    def guarded(*args, **kwargs):
        try:
            with guard.refusing(refused):  # calling what the slot replaces would call this function again
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
