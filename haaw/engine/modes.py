"""The engine's modes: whether operations are recorded (``no_grad``) and whether every operation is watched for
nan and inf (``detect_anomaly``). Context variables, as the slots of ``plugins`` are: a block opened in one
context (a running cell) reaches nothing running in another (an explorer's callback, another thread), as in
PyTorch, whose grad mode is per thread."""
from __future__ import annotations

import functools
import inspect
from contextlib import ContextDecorator, contextmanager
from contextvars import ContextVar

_grad_enabled: ContextVar[bool] = ContextVar("haaw_grad_enabled", default=True)
_detect_anomaly: ContextVar[bool] = ContextVar("haaw_detect_anomaly", default=False)
# autocast (haaw.amp.autocast): the 16-bit format matrix products run in, or None when autocast is off
_autocast = ContextVar("haaw_autocast", default=None)


class no_grad(ContextDecorator):
    """Run operations without recording them: no graph, nothing saved, no gradient.

    ``with no_grad():``, or on a function as ``@no_grad()`` or ``@no_grad``, as in PyTorch."""

    def __new__(cls, func=None):
        if func is not None:  # @no_grad without parentheses: func is the decorated function
            if not callable(func):
                raise TypeError(f"no_grad() takes no arguments (got {type(func).__name__}); write with no_grad(): ...")
            return cls()(func)
        return super().__new__(cls)

    def __init__(self, func=None):
        self._tokens = []  # a stack: the same decorator may be entered again by a recursive call

    def __call__(self, func):
        """``@no_grad()`` on a function; on a generator function, around each step the generator takes (from one
        ``yield`` to the next), as in PyTorch: calling it only makes the generator, and the caller's code between
        two steps is recorded as usual."""
        if inspect.isgeneratorfunction(func):
            @functools.wraps(func)
            def generator(*args, **kwargs):
                return (yield from _each_step_in(type(self), func(*args, **kwargs)))
            return generator
        return super().__call__(func)

    def _recreate_cm(self):
        """As a decorator, a fresh instance for every call: two threads running the decorated function at once
        each keep their own token (ContextDecorator would share this instance between them)."""
        return type(self)()

    def __enter__(self):
        self._tokens.append(_grad_enabled.set(False))
        return self

    def __exit__(self, *exc):
        _grad_enabled.reset(self._tokens.pop())
        return False


def _each_step_in(mode, steps):
    """Run the generator ``steps`` one step at a time, each inside a fresh ``mode()``: what the caller sends or
    throws in is passed on, and what it yields passed out, as ``yield from`` would, with the mode around each step."""
    try:
        with mode():
            out = next(steps)
        while True:
            try:
                sent = yield out
            except GeneratorExit:
                with mode():
                    steps.close()
                raise
            except BaseException as err:
                with mode():
                    out = steps.throw(err)
            else:
                with mode():
                    out = steps.send(sent)
    except StopIteration as done:
        return done.value


@contextmanager
def enable_grad():
    """Record operations again inside a ``no_grad`` block (``torch.enable_grad``): a checkpoint's recomputation
    needs its graph whatever mode backward was called in."""
    token = _grad_enabled.set(True)
    try:
        yield
    finally:
        _grad_enabled.reset(token)


@contextmanager
def detect_anomaly():
    """Stop at the first operation whose forward or backward produces nan or inf, and name it."""
    token = _detect_anomaly.set(True)
    try:
        yield
    finally:
        _detect_anomaly.reset(token)


def grad_enabled() -> bool:
    """Are operations recorded right now (outside every ``no_grad`` block)?"""
    return _grad_enabled.get()


def anomaly_detection() -> bool:
    """Is every operation's forward and backward watched for nan and inf right now?"""
    return _detect_anomaly.get()


def autocast_dtype():
    """The format autocast runs matrix products in (a NumPy dtype), or None when autocast is off."""
    return _autocast.get()


@contextmanager
def autocast_as(dtype):
    """Inside the block, autocast's format is ``dtype`` (None: off). ``haaw.amp.autocast`` is the public door."""
    token = _autocast.set(dtype)
    try:
        yield
    finally:
        _autocast.reset(token)
