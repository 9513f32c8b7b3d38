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

PyTorch's own versions are names too (``TORCH``: its autograd, ``torch.func``'s transforms, ``torch.optim``,
``clip_grad_norm_``, the ``GradScaler``). PyTorch cannot be marked where it is defined, so while one of them is
refused a ``TorchFunctionMode`` (thread-local, as PyTorch's ``no_grad`` is) looks at every torch call the learner's
code makes, and refuses one made from inside that part of PyTorch's source (``torch.func.vjp`` calls the learner's
function from torch/_functorch/eager_transforms.py), or one of its functions called directly
(``torch._amp_update_scale_``). While its autograd is refused PyTorch also runs with gradients off, and the failure
of its ``.backward()`` is turned into this module's message.
"""
from __future__ import annotations

import functools
import inspect
import sys
import sysconfig
import weakref
from pathlib import Path
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import Iterable

# PyTorch's versions of what the exercises rebuild: name -> (what a learner calls it, the files of PyTorch's source
# (under torch/) from which it calls back into torch, the names of its functions that do the work when called directly)
TORCH = {
    "torch.autograd": ("PyTorch's autograd (.backward() on a torch tensor, torch.autograd.grad, "
                       "torch.autograd.functional, a grad_fn called by hand or a backward kernel such as "
                       "torch.ops.aten.tanh_backward)",
                       ("autograd/__init__.py", "autograd/functional.py", "autograd/forward_ad.py",
                        "autograd/gradcheck.py"),
                       ("backward", "grad")),
    "torch.func": ("PyTorch's function transforms (torch.func.vjp, grad, jacrev, jacfwd, jvp)",
                   ("_functorch/eager_transforms.py",), ()),
    "torch.optim": ("PyTorch's optimizers (torch.optim)", ("optim/",),
                    ("_fused_adam_", "_fused_adamw_", "_fused_sgd_", "_fused_adagrad_")),
    "torch.clip_grad_norm_": ("PyTorch's clip_grad_norm_ (torch.nn.utils)", ("nn/utils/clip_grad.py",), ()),
    "torch.amp.GradScaler": ("PyTorch's GradScaler (torch.amp)", ("amp/grad_scaler.py", "cuda/amp/grad_scaler.py"),
                             ("_amp_update_scale_", "_amp_foreach_non_finite_check_and_unscale_")),
}
# name -> what a learner calls it, for every implementation marked refusable (and PyTorch's)
REFUSABLE: dict[str, str] = {name: called for name, (called, _, _) in TORCH.items()}
# what the engine's backward is made of: refused while any learner function runs in a slot (plugins.use)
BACKWARD = ("autograd.backward", "autograd.topological_order", "ops.vjp", "torch.autograd", "torch.func")

_refused: ContextVar[frozenset] = ContextVar("haaw_refused", default=frozenset())


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
            if name in _refused.get() and not (except_from and _called_from(except_from, sys._getframe(1))):
                raise ShortcutRefused(_message(name))
            return fn(*args, **kwargs)

        # no __wrapped__: fn.__wrapped__(...) would be the implementation itself, unrefused. Its signature and
        # source are still read through it (unguarded), as inspect.unwrap would have.
        del refused_while_a_learner_computes_it.__wrapped__
        refused_while_a_learner_computes_it.__signature__ = _signature(fn)
        _ORIGINAL[refused_while_a_learner_computes_it] = fn
        return refused_while_a_learner_computes_it

    return mark


def _called_from(folder: str, frame) -> bool:
    """Is ``frame`` in ``folder``, and was the code of ``folder`` that leads to it not called by a learner's code?
    (A learner's function calling one of the course's wrong versions, which calls the reference, is refused.)"""
    if not frame.f_code.co_filename.startswith(folder):
        return False
    while frame is not None and frame.f_code.co_filename.startswith(folder):
        frame = frame.f_back
    return frame is None or not _a_learners(frame.f_code.co_filename)


_LIBRARIES = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                     sysconfig.get_paths()["platlib"])})


def _a_libraries(filename: str) -> bool:
    """Is this the standard library's or an installed package's file (haaw's own is never one, wherever it lives)?"""
    return not filename.startswith(_HAAW) and (filename.startswith((*_LIBRARIES, "<frozen"))
                                               or "site-packages" in filename)


def _a_learners(filename: str) -> bool:
    """Is this a learner's file (a notebook cell, a script): not haaw's, not the standard library's or a package's?"""
    return not filename.startswith(_HAAW) and not _a_libraries(filename)


def _caller(frame):
    """The code that called into this module, going up from ``frame``: the first frame that is neither this
    module's nor a library's. A library's frame in between (contextlib's ``__enter__`` under a ``with``, a wrapper
    around a function) acts for the code that called it, and is passed over as this module's own frames are."""
    while frame is not None and (frame.f_code.co_filename == __file__ or _a_libraries(frame.f_code.co_filename)):
        frame = frame.f_back
    return frame


_ORIGINAL: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # a refusable wrapper -> what it wraps
_HAAW = str(Path(__file__).resolve().parents[1])  # the package: its code may unwrap what a learner's may not


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def unguarded(fn):
    """What ``refusable`` wrapped in ``fn`` (through any ``__wrapped__`` too, as ``inspect.unwrap`` does), for the
    course's own code and its tests: the source of a reference, the reference as a learner would have typed it.
    While a learner's code runs (something is refused) only haaw's own code may call it."""
    if _refused.get():
        caller = _caller(sys._getframe())
        if caller is None or not caller.f_code.co_filename.startswith(_HAAW):
            raise ShortcutRefused("it unwraps the course's own code (guard.unguarded), to call what it was meant to "
                                  "compute itself: compute the result from the inputs you are given")
    seen = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        method = getattr(fn, "__func__", None)  # (None is never in _ORIGINAL: no weak reference to it can be made)
        if method in _ORIGINAL:  # a bound method of a refusable one
            fn = _ORIGINAL[method].__get__(fn.__self__)
        elif fn in _ORIGINAL:  # (a built-in, to which no weak reference can be made, is never in it)
            fn = _ORIGINAL[fn]
        elif hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        else:
            break
    return fn


def check(name: str) -> None:
    """Raise ShortcutRefused if ``name`` is refused right now (for code that cannot be wrapped, a class's entry)."""
    if name in _refused.get():
        raise ShortcutRefused(_message(name))


@contextmanager
def refusing(names: Iterable[str]):
    """Run the block with the implementations ``names`` refused (added to what is refused already)."""
    names = tuple(names)  # a name not marked yet (its module not imported) is refused once it is
    token = _refused.set(_refused.get() | frozenset(names))
    in_torch = tuple(name for name in names if name in TORCH)
    torch = sys.modules.get("torch")  # never imported here
    try:
        if in_torch and hasattr(torch, "overrides"):  # (None has no attribute; nor has a torch still being imported)
            with _torch_refusing(torch, in_torch, _caller(sys._getframe())):
                yield
        else:
            yield
    except RuntimeError as error:  # PyTorch's .backward() with gradients off: say why they were off
        if torch is not None and "torch.autograd" in in_torch and "does not require grad" in str(error):
            raise ShortcutRefused(_message("torch.autograd")).with_traceback(error.__traceback__) from None
        raise
    finally:
        _refused.reset(token)


@contextmanager
def _torch_refusing(torch, names: tuple, outer):
    """PyTorch, for the block, with its versions ``names`` refused: a mode that sees every torch call (see the
    module's docstring), and gradients off and its backward kernels refused if its autograd is. ``outer`` is the
    frame that opened the block: the frames above it are not the learner's, and are not looked at."""
    from os.path import dirname, join

    mode = _function_mode(torch)(names, outer, join(dirname(torch.__file__), ""))  # its folder, with \ on Windows
    autograd = "torch.autograd" in names
    with torch.set_grad_enabled(False) if autograd else nullcontext(), mode, \
            _kernel_mode()() if autograd else nullcontext():
        yield


# The two modes' classes are made from PyTorch's own (this module never imports it): each builder makes a new class,
# and the two caches below keep the first one a process makes.

def _make_function_mode(torch):
    """A ``TorchFunctionMode`` class: thread-local, as PyTorch's ``no_grad`` is; it sees every torch call made while
    it is active, and refuses one made from inside one of the refused parts of PyTorch (TORCH), or one of their
    functions called directly."""

    class RefusingTorchShortcuts(torch.overrides.TorchFunctionMode):
        """Refuses a torch call made from inside one of the refused parts of PyTorch (TORCH), or one of their
        functions called directly; every other torch call runs as it would."""

        def __init__(self, names, outer, root):
            super().__init__()
            self.names, self.outer, self.root = names, outer, root

        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = self.refused(func)
            if name:
                raise ShortcutRefused(_message(name))
            return func(*args, **(kwargs or {}))

        def refused(self, func) -> str:
            called = getattr(func, "__name__", "")
            if "torch.autograd" in self.names and torch.is_grad_enabled():  # turned back on (torch.enable_grad):
                return "torch.autograd"  # every graph it records is for autograd, its grad_fn nodes called by hand too
            for name in self.names:
                if called in TORCH[name][2]:
                    return name
            frame = sys._getframe()  # up from here to the frame that opened the block: is one in PyTorch's source?
            while frame is not None and frame is not self.outer:
                filename = frame.f_code.co_filename
                if filename.startswith(self.root):
                    inside = filename[len(self.root):].replace("\\", "/")
                    for name in self.names:
                        if inside.startswith(TORCH[name][1]):
                            return name
                frame = frame.f_back
            return ""

    return RefusingTorchShortcuts


def _make_kernel_mode():
    """A ``TorchDispatchMode`` class (thread-local, like the function mode) that refuses every ATen operator whose
    name has "backward" in it: the kernels autograd runs (``torch.ops.aten.tanh_backward``, ``nll_loss_backward``,
    ``native_layer_norm_backward``, ``_log_softmax_backward_data`` ...), whether called by name or through a
    ``grad_fn`` node called by hand, which the function mode does not see. No forward operator has it in its name.
    (Every PyTorch that installs on the Pythons haaw supports, 2.0 and later, has both kinds of mode.) Called only
    once PyTorch is imported."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class RefusingBackwardKernels(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls):  # else PyTorch wraps the method to keep torch.compile out, and that
            return False  # imports torch._dynamo on the first call: seconds, inside the first check's limit

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "backward" in func.__name__:  # an operator's overload, always named ("tanh_backward.default")
                raise ShortcutRefused(_message("torch.autograd"))
            return func(*args, **(kwargs or {}))

    return RefusingBackwardKernels


_function_mode = functools.cache(_make_function_mode)
_kernel_mode = functools.cache(_make_kernel_mode)


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
