"""A time limit on a block of Python code: ``with TimeLimit(5):`` raises ``TooSlow`` in it when time is up.

This is what stops a learner's runaway code while ``check`` runs it. It is meant for that one use, and
this is exactly what it does and does not do.

What it supports
    - CPython only. A watchdog thread (a ``threading.Timer``) raises the exception inside the thread
      running the block, with CPython's ``PyThreadState_SetAsyncExc`` (through ``ctypes.pythonapi``).
    - Any thread, no signals: unlike ``SIGALRM`` it works off the main thread (where a kernel may run
      code) and on Windows.
    - Python code: an asynchronous exception is delivered between bytecodes, so a loop in Python code
      (``while True: pass``) is stopped within a few bytecodes of the time-out.
    - Nested limits: each ``TimeLimit`` raises its own subclass of ``TooSlow``, ``limit.expired``, so an
      enclosing limit's time-out passes through ``except inner.expired`` to the limit whose time is up,
      and a limit left by an enclosing one's time-out never fires afterwards.
    - A learner's ``except Exception`` cannot swallow it: ``TooSlow`` is a ``BaseException``.
    - A time-out swallowed once (by ``except BaseException``, a bare ``except:``, or a finaliser such as a
      ``__del__`` or a weakref callback, where an exception is printed and dropped) is raised again every
      ``AGAIN`` seconds until the block has ended, so the next one stops the block.
    - Nothing is left behind: once the block has ended (and, where the time-out arrived as it ended,
      ``limit.stop()`` has been called), no time-out arrives later, anywhere.
    - Harness code is spared: the exception is raised only while the thread is inside the block and not
      in this module's own code nor in the files named by ``spare`` (the caller's own harness, such as the
      checker's battery), so it lands in the code being timed, and a block already on its way out is
      never hit, wherever the interpreter looks for pending exceptions (that differs between versions).

What it does not do
    - C code that never returns to the interpreter is not interrupted: one long NumPy call (a huge
      matrix product), ``time.sleep``, a blocking read or a lock runs to its end; the time-out is raised
      when it returns to Python bytecode. A C call that never returns is never stopped (interrupt the
      kernel).
    - Code that swallows every delivery, a loop with ``except BaseException: pass`` (or a bare
      ``except:``) inside it, is not stopped: each delivery lands in its ``try`` and is dropped.
    - It is not a sandbox: it limits time, not memory, files or anything else the code may do.
    - Elsewhere than CPython (PyPy, GraalPy) there is no ``PyThreadState_SetAsyncExc``: ``TimeLimit`` then
      runs the block with no limit at all, ``SUPPORTED`` is False and entering a limit warns (a
      ``RuntimeWarning``) that code that never ends will not be stopped. It never crashes for lack of it.

Use::

    limit = TimeLimit(5.0)
    try:
        with limit:
            run_the_learners_code()
    except limit.expired:   # this limit's own time-out; an enclosing limit's passes on to that one
        limit.stop()        # again: the time-out may have arrived as the block ended, before __exit__ could
        ...                 # stop the watchdog
"""
from __future__ import annotations

import ctypes
import platform
import sys
import threading
import warnings

__all__ = ["SUPPORTED", "TimeLimit", "TooSlow"]


class TooSlow(BaseException):
    """Raised by the time limit; a BaseException, so that a learner's ``except Exception`` cannot swallow it."""


def _async_exc_setter():
    """CPython's ``PyThreadState_SetAsyncExc`` (thread id, exception class or None) -> threads hit, or None."""
    if platform.python_implementation() != "CPython" or not hasattr(sys, "_current_frames"):
        return None
    try:
        return ctypes.pythonapi.PyThreadState_SetAsyncExc
    except (AttributeError, OSError):
        return None


_set_async_exc = _async_exc_setter()
SUPPORTED = _set_async_exc is not None  # False: TimeLimit runs blocks with no limit, and says so


class TimeLimit:
    """``with limit:`` raises ``limit.expired`` (a ``TooSlow``) in this thread once ``seconds`` have passed.

    ``spare``: files (``__file__`` of the caller's harness) whose code is never hit; the time-out waits until
    the thread is back in the timed code. The ``except limit.expired`` that catches it calls ``limit.stop()``:
    the time-out may have arrived on the first instruction of ``__exit__``, before it could stop the watchdog.
    Where ``SUPPORTED`` is False the block runs with no limit (the module's docstring says what is supported).
    """

    AGAIN = 0.1  # seconds between two deliveries, once the time is up
    WAIT = 0.01  # seconds before looking again, when the thread is in spared code

    def __init__(self, seconds: float, *, spare: tuple = ()):
        self.seconds = seconds
        self.spared = frozenset({__file__, *spare})
        self.expired = type("TooSlow", (TooSlow,), {"__doc__": TooSlow.__doc__})
        self._lock = threading.Lock()  # the watchdog raises only while the block runs, checked under the lock
        self._running = self._fired = False
        self._timer = None
        self._owner = None

    @property
    def supported(self) -> bool:
        """Can this limit stop anything here (CPython)? If not, the block runs with no limit."""
        return _set_async_exc is not None

    @property
    def fired(self) -> bool:
        """Has the watchdog raised the time-out in the block at least once?"""
        return self._fired

    def _arm(self, delay: float):
        self._timer = threading.Timer(delay, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _in_timed_code(self) -> bool:
        """Is the thread inside the block (its ``with`` frame on the stack), and not in spared code?"""
        frame = sys._current_frames().get(self._thread)
        if frame is None or frame.f_code.co_filename in self.spared:
            return False
        while frame is not None and frame is not self._owner:
            frame = frame.f_back
        return frame is not None

    def _fire(self):
        with self._lock:
            if not self._running:
                return
            if not self._in_timed_code():
                self._arm(self.WAIT)
                return
            hit = _set_async_exc(ctypes.c_ulong(self._thread), ctypes.py_object(self.expired))
            if hit > 1:  # more than one thread: undo (it cannot happen for a live thread's own id)
                _set_async_exc(ctypes.c_ulong(self._thread), None)
            self._fired = self._fired or hit == 1
            self._arm(self.AGAIN)

    def __enter__(self):
        if not self.supported:
            warnings.warn(f"no time limit on {platform.python_implementation()}: stopping code that runs too long "
                          "needs CPython's PyThreadState_SetAsyncExc, so code that never ends will not be stopped "
                          "(interrupt the kernel instead)", RuntimeWarning, stacklevel=2)
            return self
        self._thread = threading.get_ident()
        self._owner = sys._getframe(1)  # the frame that holds the `with`
        with self._lock:
            self._running = True
            self._arm(self.seconds)
        return self

    def stop(self):
        """Stop the watchdog; take back what it raised that has not arrived yet. Safe to call twice."""
        with self._lock:
            self._running = False
            if self._fired:
                _set_async_exc(ctypes.c_ulong(self._thread), None)
            if self._timer is not None:
                self._timer.cancel()
        self._owner = None  # no frame kept alive

    def __exit__(self, kind, err, tb):
        # The watchdog raises nothing while this module's code runs, so at most one time-out, raised just
        # before the block ended, can arrive in here; then the time was up after all, and it is the block's.
        try:
            self.stop()
        except self.expired:
            self.stop()
            if kind is None:
                raise
        return False
