"""The time limit (haaw/course/exercises/watchdog.py): it stops an endless loop on any thread, without
signals, lets nothing out after its block has ended, and where it cannot work (off CPython) it runs the
block with no limit and says so. First the module itself, then through ``check``, as a learner meets it.

The tests that wait out a limit, or sleep, are marked slow: they take seconds together."""
import _thread
import contextlib
import ctypes
import platform
import signal
import sys
import threading
import time

import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises import code as code_module
from haaw.course.exercises import watchdog
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.watchdog import TimeLimit, TooSlow
from haaw.engine import guard


@contextlib.contextmanager
def fails_rather_than_hangs(seconds=10.0):
    """A test of the time limit fails, instead of hanging the suite, when nothing stops the loop."""
    guard = threading.Timer(seconds, _thread.interrupt_main)
    guard.daemon = True
    guard.start()
    try:
        yield
    except KeyboardInterrupt:
        pytest.fail(f"still running after {seconds:g} s: nothing stopped the endless loop")
    finally:
        guard.cancel()


def loops(*args):
    while True:
        pass


def swallows_everything(*args):  # a learner's `except Exception` must not swallow the time limit
    while True:
        try:
            while True:  # the limit strikes here, inside the try
                pass
        except Exception:
            pass


# --- the module itself ----------------------------------------------------------------------------
def test_the_time_out_is_no_exception_and_each_limit_raises_its_own_kind():
    a, b = TimeLimit(1), TimeLimit(1)
    assert issubclass(a.expired, TooSlow) and issubclass(TooSlow, BaseException)
    assert not issubclass(TooSlow, Exception)  # so that `except Exception` lets it through
    assert a.expired is not b.expired and not issubclass(a.expired, b.expired) and not issubclass(b.expired, a.expired)


def test_this_interpreter_is_supported():
    assert watchdog.SUPPORTED == (platform.python_implementation() == "CPython") and TimeLimit(1).supported


def test_a_loop_in_python_code_is_stopped_with_the_limit_s_own_time_out():
    limit = TimeLimit(0.02)
    with fails_rather_than_hangs(5), pytest.raises(limit.expired):
        with limit:
            loops()
    assert limit.fired


def test_a_block_that_ends_in_time_is_left_alone():
    limit = TimeLimit(10)
    with limit:
        total = 0
        for i in range(20):  # Python code, where a time-out would land, and sleeps, where the watchdog runs
            time.sleep(0.002)
            total += i
    assert total == 190 and not limit.fired
    limit.stop()  # a second stop is harmless


def test_the_harness_s_own_code_is_spared_and_the_time_out_waits_for_the_timed_code():
    source = ("import time\n"
              "def harness(seconds, out):\n"
              "    end = time.perf_counter() + seconds\n"
              "    while time.perf_counter() < end:\n"
              "        pass\n"
              "    out.append('done')\n")
    namespace = {}
    exec(compile(source, "<the harness>", "exec"), namespace)
    limit, out = TimeLimit(0.02, spare=("<the harness>",)), []
    with fails_rather_than_hangs(5), pytest.raises(limit.expired):
        with limit:
            namespace["harness"](0.1, out)  # runs past the limit, untouched
            loops()  # the timed code: stopped here
    assert out == ["done"]


def test_off_cpython_the_setter_is_not_looked_for(monkeypatch):
    assert watchdog._async_exc_setter() is not None
    monkeypatch.setattr(platform, "python_implementation", lambda: "PyPy")
    assert watchdog._async_exc_setter() is None
    monkeypatch.undo()
    monkeypatch.delattr(ctypes, "pythonapi")
    assert watchdog._async_exc_setter() is None


def test_without_the_setter_the_block_runs_with_no_limit_and_says_so(monkeypatch):
    monkeypatch.setattr(watchdog, "_set_async_exc", None)
    limit = TimeLimit(0.01)
    assert not limit.supported
    with pytest.warns(RuntimeWarning, match="no time limit .* will not be stopped"):
        with limit:
            end = time.perf_counter() + 0.05  # past the limit, in Python code
            while time.perf_counter() < end:
                pass
    assert not limit.fired and limit._timer is None  # no watchdog was started
    limit.stop()


def test_without_the_setter_check_still_checks(monkeypatch):
    monkeypatch.setattr(watchdog, "_set_async_exc", None)
    with pytest.warns(RuntimeWarning, match="no time limit"):
        feedback = check("04-tanh-backward", guard.unguarded(REGISTRY["04-tanh-backward"].reference))
    assert feedback.status == CORRECT


@pytest.mark.slow
def test_a_loop_off_the_main_thread_is_stopped():
    limit, caught = TimeLimit(0.05), []

    def work():
        try:
            with limit:
                loops()
        except TooSlow as err:
            caught.append(err)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(10)  # a daemon thread: if nothing stops it, the test fails and the loop dies with the process
    assert not worker.is_alive() and isinstance(caught[0], limit.expired)


@pytest.mark.slow
def test_a_long_c_call_runs_to_its_end_and_the_time_out_arrives_when_it_returns():
    limit = TimeLimit(0.02)
    start = time.monotonic()
    with fails_rather_than_hangs(5), pytest.raises(limit.expired):
        with limit:
            time.sleep(0.2)  # one C call: the limit passes during it
            loops()
    assert time.monotonic() - start >= 0.2  # the sleep was not cut short: a lower bound, whatever the machine


@pytest.mark.slow
def test_a_time_out_swallowed_by_except_base_exception_is_raised_again():
    limit, caught = TimeLimit(0.02), []
    with fails_rather_than_hangs(5), pytest.raises(limit.expired):
        with limit:
            try:
                loops()
            except BaseException as err:  # as a learner's bare `except:` would
                caught.append(err)
            loops()  # the next delivery stops this one
    assert isinstance(caught[0], limit.expired)


@pytest.mark.slow
def test_many_blocks_that_end_as_their_limit_is_up_leave_no_time_out_behind():
    # blocks that end just as their limit is up, many times over: the watchdog often raises while the block
    # is on its way out, and what it raised must never arrive after the block has ended
    stray = 0
    for _ in range(300):
        limit = TimeLimit(0.002)
        try:
            with limit:
                end = time.perf_counter() + 0.002
                while time.perf_counter() < end:
                    pass
        except limit.expired:
            limit.stop()  # as check_code does: it may have arrived before __exit__ could stop the watchdog
        try:
            for _ in range(200):  # Python code after the block, where a stray time-out would land
                pass
        except TooSlow:
            stray += 1
    assert stray == 0


@pytest.mark.slow
def test_a_time_out_raised_while_the_block_is_leaving_is_taken_back(monkeypatch):
    # the watchdog raises while this thread waits for the limit's lock on its way out of the block: the
    # exception is set but not delivered when the block has ended, and must be taken back
    real, me = watchdog._set_async_exc, threading.get_ident()
    leaving = {TimeLimit.__exit__.__code__, TimeLimit.stop.__code__}

    def once_this_thread_is_leaving(thread, exc):  # the watchdog's call, made while it holds the lock
        deadline = time.monotonic() + 5
        while sys._current_frames()[me].f_code not in leaving and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.05)  # now waiting for the lock
        watchdog._set_async_exc = real  # so that the way out calls the real one, in C, with nothing in between
        return real(thread, exc)

    monkeypatch.setattr(watchdog, "_set_async_exc", once_this_thread_is_leaving)
    limit = TimeLimit(0.05)
    try:
        with limit:
            time.sleep(0.3)  # one C call: the limit passes during it, and the watchdog waits
    except limit.expired:
        pass  # it arrived as the block ended: the block's own time-out, which the time was
    try:
        for _ in range(30):
            time.sleep(0.01)
    except TooSlow:
        pytest.fail("a time-out that fired as the block ended was raised after the block had ended")
    assert limit.fired


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop this test is about
def test_a_time_out_dropped_by_a_finaliser_is_raised_again():
    """An exception that lands in a __del__ is printed and dropped: one delivery alone would leave the loop running."""
    class Eats:
        def __del__(self):  # swallows whatever arrives while it runs, as a finaliser does
            try:
                end = time.perf_counter() + 0.2
                while time.perf_counter() < end:
                    pass
            except BaseException:
                pass

    limit = TimeLimit(0.05)
    with fails_rather_than_hangs(), pytest.raises(limit.expired):
        with limit:
            Eats()  # the first delivery arrives inside its __del__ and is eaten there
            loops()


@pytest.mark.slow
def test_a_limit_inside_another_stops_its_own_block_and_lets_the_enclosing_one_s_time_out_through():
    outer, inner = TimeLimit(0.6), TimeLimit(0.1)
    with fails_rather_than_hangs(), pytest.raises(outer.expired):
        with outer:
            with pytest.raises(inner.expired):  # the inner limit is up first: its own except stops it
                with inner:
                    loops()
            loops()  # the outer limit still stops what follows
    outer, inner = TimeLimit(0.1), TimeLimit(0.6)
    with fails_rather_than_hangs(), pytest.raises(outer.expired):
        with outer:
            try:
                with inner:
                    loops()
            except inner.expired:
                pytest.fail("the enclosing limit's time-out was taken for the inner one's")
    inner._timer.join(1)  # and the inner limit, left by the outer's time-out, never fires
    assert not inner._timer.is_alive() and not inner.fired


# --- through check, as a learner meets it -----------------------------------------------------------
@pytest.mark.slow
def test_an_endless_loop_is_stopped_by_the_first_time_out_and_named_as_too_slow(monkeypatch):
    # counted, not timed: the first delivery stops the loop, within a few turns of it, whatever the machine
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    monkeypatch.setattr(TimeLimit, "AGAIN", 30.0)  # a second delivery would come only if the first failed
    real, turns, at_delivery = watchdog._set_async_exc, [0], []

    def counted(thread, exc):  # called by the watchdog, with the GIL: the loop is paused meanwhile
        if exc is not None:
            at_delivery.append(turns[0])
        return real(thread, exc)

    def loops(*args):
        while True:
            turns[0] += 1

    monkeypatch.setattr(watchdog, "_set_async_exc", counted)
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", loops)
    assert feedback.status == WRONG and "loops took longer than 0.3 s" in feedback.message, feedback.message
    assert "was stopped" in feedback.message
    assert len(at_delivery) == 1 and 0 < at_delivery[0] <= turns[0] <= at_delivery[0] + 100, (at_delivery, turns)


@pytest.mark.slow
def test_an_endless_loop_is_stopped_off_the_main_thread_too(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    results = []
    worker = threading.Thread(target=lambda: results.append(check("04-tanh-backward", loops)), daemon=True)
    worker.start()
    worker.join(10)  # a daemon thread: if nothing stops it, the test fails and the loop dies with the process
    assert not worker.is_alive(), "check never returned: nothing stopped the loop off the main thread"
    assert results[0].status == WRONG and "was stopped" in results[0].message


@pytest.mark.slow
def test_the_time_limit_needs_no_signals_as_on_windows(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    monkeypatch.delattr(signal, "setitimer")
    monkeypatch.delattr(signal, "SIGALRM")
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", loops)
    assert feedback.status == WRONG and "was stopped" in feedback.message


@pytest.mark.slow
def test_a_learner_s_except_exception_inside_the_loop_cannot_swallow_the_time_limit(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", swallows_everything)
    assert feedback.status == WRONG and "swallows_everything took longer than 0.3 s" in feedback.message


@pytest.mark.slow
def test_a_function_that_passes_in_time_leaves_no_time_out_behind(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    assert check("04-tanh-backward", guard.unguarded(REGISTRY["04-tanh-backward"].reference)).status == CORRECT
    try:
        for _ in range(60):  # twice the limit, running Python between the sleeps, where a stray one would land
            time.sleep(0.01)
    except TooSlow:
        pytest.fail("the time limit struck after check had returned")


@pytest.mark.slow
def test_after_a_time_out_nothing_more_arrives(monkeypatch):
    # the watchdog raises again every 0.1 s until the block ends: once check has returned it must be silent
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.02)
    with fails_rather_than_hangs():
        for _ in range(20):
            assert "took longer than" in check("04-tanh-backward", loops).message
    try:
        end = time.perf_counter() + 0.4  # four times the watchdog's interval, in Python code
        while time.perf_counter() < end:
            pass
    except TooSlow:
        pytest.fail("a time-out arrived after check had returned")


@pytest.mark.slow
def test_a_time_out_that_arrives_as_the_block_ends_still_leaves_nothing_behind(monkeypatch):
    # as if the time-out arrived on the very first instruction of __exit__, so that __exit__ never ran
    def leave_at_once(self, kind, err, tb):
        raise self.expired()

    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.05)
    monkeypatch.setattr(TimeLimit, "__exit__", leave_at_once)
    feedback = check("04-tanh-backward", guard.unguarded(REGISTRY["04-tanh-backward"].reference))
    assert "took longer than" in feedback.message  # the time was up as the block ended: reported as such
    try:
        end = time.perf_counter() + 0.4
        while time.perf_counter() < end:
            pass
    except TooSlow:
        pytest.fail("a time-out arrived after check had returned")
