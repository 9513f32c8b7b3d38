"""What a learner's code may not call while it runs in the engine's place.

A learner writes a piece of the engine (a local derivative, a backward, a loss scaler) and the course runs it:
``check`` on its cases, then ``yours(...)`` inside the engine. Calling the engine's own version of that piece
from inside would pass every case without writing anything, and from inside a slot it would call the slot
again, without end. So, while a learner's function runs, the implementations it is meant to replace refuse:

- each is marked ``@refusable("name", "what a learner calls it")`` where it is defined, so it is refused by
  identity, whatever name it was imported under (``from haaw.engine.ops import unbroadcast as ub`` too);
- ``refusing(names)`` says which are refused for the block; a context variable holds them, so another thread,
  or a cell that is not running the learner's code, is untouched, and no module attribute is ever replaced;
- a refused call raises ``ShortcutRefused``, whose message says what was called and what to write instead.

``"torch.autograd"`` is a name too: PyTorch's autograd cannot be marked here, so while it is refused PyTorch runs
with gradients off (thread-local, as its ``no_grad``), and the failure of its ``.backward()`` is turned into this
module's message. (``torch.func``'s transforms ignore the mode and are not refused.)
"""
from __future__ import annotations

import functools
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Iterable, Mapping

# name -> what a learner calls it, for every implementation marked refusable (and PyTorch's autograd)
REFUSABLE: dict[str, str] = {"torch.autograd": "PyTorch's autograd (.backward() on a torch tensor)"}
# what the engine's backward is made of: refused while any learner function runs in a slot (plugins.use)
BACKWARD = ("autograd.backward", "autograd.topological_order", "ops.vjp", "torch.autograd")

_refused: ContextVar[Mapping[str, str]] = ContextVar("haaw_refused", default=MappingProxyType({}))


class ShortcutRefused(RuntimeError):
    """A learner's function called an implementation of what it is meant to compute itself."""


def _message(name: str) -> str:
    return (f"it calls {REFUSABLE[name]}, which computes what this code is meant to compute. Calling it is not "
            "writing it (and from inside the engine it would call your function again): compute the result from the "
            "inputs you are given")


def refusable(name: str, called: str, *, except_from: str | None = None):
    """Mark an implementation as one that ``refusing(name)`` refuses. Costs one context-variable read a call.

    ``except_from``: a folder whose code may still call it while it is refused (the course's own wrong versions
    of a reference, which call it with a mistake switched on); a learner's code lives elsewhere."""
    REFUSABLE[name] = called

    def mark(fn):
        @functools.wraps(fn)
        def refused_while_a_learner_computes_it(*args, **kwargs):
            if name in _refused.get() and not (
                    except_from and sys._getframe(1).f_code.co_filename.startswith(except_from)):
                raise ShortcutRefused(_message(name))
            return fn(*args, **kwargs)

        refused_while_a_learner_computes_it.refusable_as = name
        return refused_while_a_learner_computes_it

    return mark


def check(name: str) -> None:
    """Raise ShortcutRefused if ``name`` is refused right now (for code that cannot be wrapped, a class's entry)."""
    if name in _refused.get():
        raise ShortcutRefused(_message(name))


@contextmanager
def refusing(names: Iterable[str]):
    """Run the block with the implementations ``names`` refused (added to what is refused already)."""
    names = tuple(names)  # a name not marked yet (its module not imported) is refused once it is
    token = _refused.set(MappingProxyType({**_refused.get(), **dict.fromkeys(names, "")}))
    torch = sys.modules.get("torch") if "torch.autograd" in names else None  # never imported here
    try:
        if torch is not None and hasattr(torch, "set_grad_enabled"):
            with torch.set_grad_enabled(False):
                yield
        else:
            yield
    except RuntimeError as error:  # PyTorch's .backward() with gradients off: say why they were off
        if torch is not None and "does not require grad" in str(error):
            raise ShortcutRefused(_message("torch.autograd")).with_traceback(error.__traceback__) from None
        raise
    finally:
        _refused.reset(token)


def while_refusing(fn, names: Iterable[str]):
    """``fn``, running with ``names`` refused whenever it is called (a class is returned as it is: the engine calls
    its methods, not it)."""
    names = tuple(names)
    if isinstance(fn, type) or not names:
        return fn

    @functools.wraps(fn)
    def on_its_own(*args, **kwargs):
        with refusing(names):
            return fn(*args, **kwargs)

    return on_its_own
