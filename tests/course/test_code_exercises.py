"""Every code exercise: its reference passes, each named mistake is diagnosed by name, and no input
(code that raises, loops, recurses or returns garbage) makes a checker raise."""
import inspect
import textwrap
import _thread
import contextlib
import signal
import sys
import threading
import time

import numpy as np
import pytest

from haaw import Tensor
from haaw.course.exercises import REGISTRY, check, hint, passed, solution, yours
from haaw.course.exercises import code as code_module
from haaw.course.exercises.code import CodeExercise
from haaw.course.exercises.core import CORRECT, NOT_ATTEMPTED, UNREADABLE, WRONG
from haaw.engine import plugins

CODE = sorted(k for k, ex in REGISTRY.items() if isinstance(ex, CodeExercise))
MISTAKES = [(k, m) for k in CODE for m in REGISTRY[k].mistakes]


def test_every_notebook_has_a_code_exercise_and_there_are_at_least_twelve():
    assert len(CODE) >= 12
    assert {k[:2] for k in CODE} == {f"{n:02d}" for n in range(1, 11)}


@pytest.mark.parametrize("key", CODE)
def test_the_reference_passes_and_counts_as_passed(key):
    ex = REGISTRY[key]
    feedback = check(key, ex.reference)
    assert feedback.status == CORRECT, feedback.message
    assert passed(key, ex.reference) and feedback.message.startswith("✓ Correct")
    assert len(ex.mistakes) >= 3 and len(ex.hints) >= 1


@pytest.mark.parametrize("key, mistake", MISTAKES, ids=lambda x: x if isinstance(x, str) else x.name)
def test_each_named_mistake_is_diagnosed_by_its_name(key, mistake):
    feedback = check(key, mistake.code)
    assert feedback.status == WRONG
    assert f"This looks like {mistake.name}: {mistake.why}" in feedback.message


def raises(*args):
    return 1 / 0


def loops(*args):
    while True:
        pass


def recurses(*args):
    return recurses(*args)


def swallows_everything(*args):  # a learner's `except Exception` must not swallow the time limit
    while True:
        try:
            while True:  # the limit strikes here, inside the try
                pass
        except Exception:
            pass


GARBAGE_FUNCTIONS = {
    "raises": (raises, "raised ZeroDivisionError: division by zero"),
    "loops": (loops, "was stopped"),
    "swallows": (swallows_everything, "was stopped"),
    "recurses": (recurses, "deeper than Python allows"),
    "None": (lambda *a: None, "returned None"),
    "text": (lambda *a: "forty-two", ""),
    "nan": (lambda *a: (np.full(3, np.nan),) * 4, ""),
    "empty tuple": (lambda *a: (), ""),
    "a Tensor": (lambda *a: Tensor(np.ones(2)), ""),
    "a dict": (lambda *a: {"dX": 1}, ""),
}


@pytest.mark.parametrize("key", CODE)
@pytest.mark.parametrize("kind", sorted(GARBAGE_FUNCTIONS))
def test_learner_code_that_misbehaves_gets_a_message_never_an_exception(key, kind, monkeypatch):
    # code that never returns waits out the limit: keep it short (17 exercises × 2 such kinds); the rest
    # keep the real limit, so that a busy machine cannot turn a RecursionError into a time-out
    if kind in ("loops", "swallows"):
        monkeypatch.setattr(code_module, "TIME_LIMIT", 0.05)
    fn, words = GARBAGE_FUNCTIONS[kind]
    feedback = check(key, fn)
    assert feedback.status in (WRONG, UNREADABLE), feedback.message
    if key == "06-checkpoint":  # its answer is a class: a function is named as the wrong kind of answer
        words = "pass your class itself, a subclass of Function"
    elif key == "02-backward" and kind == "None":  # backward returns None anyway: nothing was filled in
        words = "no seed"
    elif kind == "None":
        words = "None"
    assert words in feedback.message
    assert "Traceback" not in feedback.message and not passed(key, fn)


@pytest.mark.parametrize("key", CODE)
@pytest.mark.parametrize("answer", [None, 3, "linear_backward", [1, 2], np.ones(3), True], ids=repr)
def test_something_that_is_not_a_function_is_named(key, answer):
    feedback = check(key, answer)
    assert feedback.status == UNREADABLE and "needs your function itself" in feedback.message


@pytest.mark.parametrize("key", CODE)
def test_the_untouched_template_is_not_attempted(key):
    assert check(key, ...).status == NOT_ATTEMPTED
    assert REGISTRY[key].question in check(key, ...).message


def test_a_function_with_a_placeholder_left_is_not_attempted_and_the_line_is_named(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text("import numpy as np\n\ndef tanh_backward(y, G):\n    dx = ...\n    return dx\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    feedback = check("04-tanh-backward", namespace["tanh_backward"])
    assert feedback.status == NOT_ATTEMPTED and "line 4 of tanh_backward still holds a `...`" in feedback.message


def test_numpy_s_own_ellipsis_in_an_index_is_code_not_a_placeholder(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text("import numpy as np\n\ndef softmax_backward(s, G):\n"
                    "    inner = np.sum(G * s, axis=-1)[..., None]\n    return s * (G - inner)\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    assert check("05-softmax-backward", namespace["softmax_backward"]).status == CORRECT


def test_the_learner_s_own_line_is_shown_when_their_code_raises(tmp_path):
    path = tmp_path / "learner.py"
    path.write_text("def linear_backward(X, W, G):\n    dX = G @ W\n    return dX, X.T @ G, G.sum(0)\n")
    namespace = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    message = check("03-linear-backward", namespace["linear_backward"]).message
    assert "raised ValueError" in message and "line 2 of linear_backward: dX = G @ W" in message
    assert "code.py" not in message


def test_a_near_miss_shows_the_differing_entries_as_text_and_as_a_highlighted_table():
    from haaw.course.exercises.nb04 import tanh_backward

    feedback = check("04-tanh-backward", lambda y, G: tanh_backward(y, G) * 1.001)
    assert "yours" in feedback.message and "expected" in feedback.message and "difference" in feedback.message
    assert "<table" in feedback._repr_html_() and "background" in feedback._repr_html_()


def test_solutions_can_be_switched_off_for_graded_use(monkeypatch):
    assert "def linear_backward" in solution("03-linear-backward").message
    monkeypatch.setenv("HAAW_SOLUTIONS", "off")
    for key in ("03-linear-backward", "01-step"):
        assert "Solutions are switched off" in solution(key).message
        assert hint(key, 1).message.startswith("Hint 1/")


def test_yours_plugs_in_only_a_function_that_passed_and_restores_afterwards(capsys):
    from haaw.course.exercises.nb04 import relu_backward, tanh_backward

    def my_tanh(y, G):
        return tanh_backward(y, G)

    def my_relu(y, G):
        return relu_backward(y, G)

    assert check("04-tanh-backward", my_tanh).status == CORRECT
    with yours(tanh=my_tanh, relu=my_relu) as plugged:
        assert {k: getattr(v, "__wrapped__", v) for k, v in plugins.in_use().items()} == {"tanh": my_tanh}
        assert not plugged.all
    out = capsys.readouterr().out
    assert "✓ your my_tanh runs in the engine's place (tanh)" in out
    assert "relu: the engine's own, because your relu_backward(y, G) -> dx has not passed" in out
    assert plugins.in_use() == {}


def test_a_function_that_passed_and_then_fails_is_no_longer_plugged_in():
    from haaw.course.exercises.nb04 import tanh_backward

    state = {"right": True}

    def flaky(y, G):
        return tanh_backward(y, G) * (1.0 if state["right"] else 2.0)

    assert check("04-tanh-backward", flaky).status == CORRECT and passed("04-tanh-backward", flaky)
    state["right"] = False
    assert check("04-tanh-backward", flaky).status == WRONG and not passed("04-tanh-backward", flaky)


def test_the_stored_pytorch_numbers_are_what_pytorch_computes():
    torch = pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "make_reference_data", Path(__file__).resolve().parents[2] / "scripts" / "make_reference_data.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    from haaw.course.exercises.nb07 import torch_reference

    stored = torch_reference()
    for pattern in stored["gradscaler"][:5]:
        settings = {k: pattern[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}
        assert script.scaler_sequence(found_inf=pattern["found_inf"], **settings) == pattern["scales"]
    run = stored["adam"][0]
    np.testing.assert_allclose(script.adam_steps(run["p0"], run["grads"], run["lr"], (run["beta1"], run["beta2"]),
                                                 run["eps"]), run["params"], rtol=1e-12)
    assert torch.__version__


def test_an_exercise_that_knows_why_code_is_slow_says_so(monkeypatch):
    def backward(root):  # correct, but a list of ids: n² comparisons on the 10,000-node chain
        order, seen, stack = [], [], [root]
        while stack:
            node = stack.pop()
            if node is None:
                order.append(stack.pop())
                continue
            if id(node) in seen:
                continue
            seen.append(id(node))
            stack += [node, None] + [p for p in node._parents if id(p) not in seen]
        root.grad = 1.0
        for node in reversed(order):
            for parent, local in zip(node._parents, node._local):
                parent.grad += node.grad * local

    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.5)
    message = check("02-backward", backward).message
    assert "was stopped" in message and "in a set" in message


def test_a_float32_case_answered_in_float64_is_told_the_inputs_dtype():
    def tanh_backward(y, G):
        dx = (1 - y**2) * G
        return dx if y.dtype == np.float64 else dx.astype(np.float64) + 1e-3  # float64, and a little off

    message = check("04-tanh-backward", tanh_backward).message
    assert "dx is float64, but it should be float32, like the inputs (float32)" in message


def test_a_float32_answer_is_held_to_float32_s_tolerance_even_where_the_reference_is_float64(monkeypatch):
    from haaw.course.exercises import nb04

    reference = REGISTRY["04-tanh-backward"].reference
    monkeypatch.setattr(REGISTRY["04-tanh-backward"], "reference",
                        # on float32 inputs: works in float64 and rounds differently, 1e-5 apart (float32's precision)
                        lambda y, G: reference(y.astype(np.float64), G.astype(np.float64)) * (1 + 1e-5)
                        if y.dtype == np.float32 else reference(y, G))
    assert check("04-tanh-backward", nb04.tanh_backward).status == CORRECT


# --- the time limit: stops an endless loop on any thread, without signals, and leaves nothing behind --
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


def test_an_endless_loop_is_stopped_soon_after_the_limit_and_named_as_too_slow(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    start = time.perf_counter()
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", loops)
    took = time.perf_counter() - start
    assert feedback.status == WRONG and "loops took longer than 0.3 s" in feedback.message, feedback.message
    assert "was stopped" in feedback.message and 0.3 <= took < 3


def test_an_endless_loop_is_stopped_off_the_main_thread_too(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    results = []
    worker = threading.Thread(target=lambda: results.append(check("04-tanh-backward", loops)), daemon=True)
    worker.start()
    worker.join(10)  # a daemon thread: if nothing stops it, the test fails and the loop dies with the process
    assert not worker.is_alive(), "check never returned: nothing stopped the loop off the main thread"
    assert results[0].status == WRONG and "was stopped" in results[0].message


def test_the_time_limit_needs_no_signals_as_on_windows(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    monkeypatch.delattr(signal, "setitimer")
    monkeypatch.delattr(signal, "SIGALRM")
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", loops)
    assert feedback.status == WRONG and "was stopped" in feedback.message


def test_a_learner_s_except_exception_inside_the_loop_cannot_swallow_the_time_limit(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    with fails_rather_than_hangs():
        feedback = check("04-tanh-backward", swallows_everything)
    assert feedback.status == WRONG and "swallows_everything took longer than 0.3 s" in feedback.message


def test_a_function_that_passes_in_time_leaves_no_time_out_behind(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.3)
    assert check("04-tanh-backward", REGISTRY["04-tanh-backward"].reference).status == CORRECT
    try:
        for _ in range(60):  # twice the limit, running Python between the sleeps, where a stray one would land
            time.sleep(0.01)
    except code_module._TooSlow:
        pytest.fail("the time limit struck after check had returned")


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
    except code_module._TooSlow:
        pytest.fail("a time-out arrived after check had returned")


def test_a_time_out_that_arrives_as_the_block_ends_still_leaves_nothing_behind(monkeypatch):
    # as if the time-out arrived on the very first instruction of __exit__, so that __exit__ never ran
    def leave_at_once(self, kind, err, tb):
        raise self.expired()

    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.05)
    monkeypatch.setattr(code_module._TimeLimit, "__exit__", leave_at_once)
    feedback = check("04-tanh-backward", REGISTRY["04-tanh-backward"].reference)
    assert "took longer than" in feedback.message  # the time was up as the block ended: reported as such
    try:
        end = time.perf_counter() + 0.4
        while time.perf_counter() < end:
            pass
    except code_module._TooSlow:
        pytest.fail("a time-out arrived after check had returned")


def test_many_blocks_that_end_as_their_limit_is_up_leave_no_time_out_behind():
    # blocks that end just as their limit is up, many times over: the watchdog often raises while the block
    # is on its way out, and what it raised must never arrive after the block has ended
    stray = 0
    for _ in range(300):
        limit = code_module._TimeLimit(0.002)
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
        except code_module._TooSlow:
            stray += 1
    assert stray == 0


def test_a_time_out_raised_while_the_block_is_leaving_is_taken_back(monkeypatch):
    # the watchdog raises while this thread waits for the limit's lock on its way out of the block: the
    # exception is set but not delivered when the block has ended, and must be taken back
    real, me = code_module._set_async_exc, threading.get_ident()
    exiting = code_module._TimeLimit.__exit__.__code__

    def once_this_thread_is_leaving(thread, exc):  # the watchdog's call, made while it holds the lock
        deadline = time.monotonic() + 5
        while sys._current_frames()[me].f_code is not exiting and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.05)  # now waiting for the lock
        code_module._set_async_exc = real  # so that the way out calls the real one, in C, with nothing in between
        return real(thread, exc)

    monkeypatch.setattr(code_module, "_set_async_exc", once_this_thread_is_leaving)
    limit = code_module._TimeLimit(0.05)
    try:
        with limit:
            time.sleep(0.3)  # one C call: the limit passes during it, and the watchdog waits
    except limit.expired:
        pass  # it arrived as the block ended: the block's own time-out, which the time was
    try:
        for _ in range(30):
            time.sleep(0.01)
    except code_module._TooSlow:
        pytest.fail("a time-out that fired as the block ended was raised after the block had ended")
    assert limit._fired


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

    limit = code_module._TimeLimit(0.05)
    with fails_rather_than_hangs(), pytest.raises(limit.expired):
        with limit:
            Eats()  # the first delivery arrives inside its __del__ and is eaten there
            loops()


def test_a_limit_inside_another_stops_its_own_block_and_lets_the_enclosing_one_s_time_out_through():
    outer, inner = code_module._TimeLimit(0.6), code_module._TimeLimit(0.1)
    with fails_rather_than_hangs(), pytest.raises(outer.expired):
        with outer:
            with pytest.raises(inner.expired):  # the inner limit is up first: its own except stops it
                with inner:
                    loops()
            loops()  # the outer limit still stops what follows
    outer, inner = code_module._TimeLimit(0.1), code_module._TimeLimit(0.6)
    with fails_rather_than_hangs(), pytest.raises(outer.expired):
        with outer:
            try:
                with inner:
                    loops()
            except inner.expired:
                pytest.fail("the enclosing limit's time-out was taken for the inner one's")
    inner._timer.join(1)  # and the inner limit, left by the outer's time-out, never fires
    assert not inner._timer.is_alive() and not inner._fired


def test_no_hint_is_the_solution_s_code():
    """Hints help, one tier at a time; the solution stays with solution(), which a student edition switches off."""
    import ast

    for key, ex in REGISTRY.items():
        if not hasattr(ex, "reference"):
            continue
        body = ast.parse(ex.solution).body[0]  # the code solution() shows
        returns = [ast.unparse(node.value) for node in ast.walk(body) if isinstance(node, ast.Return) and node.value]
        for hint_text in ex.hints:
            compact = hint_text.replace(" ", "")
            assert "return" not in hint_text or not any(r.replace(" ", "") in compact for r in returns), (key, hint_text)
            for r in returns:
                assert len(r) < 12 or r.replace(" ", "") not in compact, (key, r, hint_text)


@pytest.mark.parametrize("key", sorted(k for k, ex in REGISTRY.items() if getattr(ex, "solution_code", "")))
def test_a_solution_stored_apart_from_its_reference_passes_the_checker(key):
    """Where the reference can also make the table's mistakes (keyword arguments), the solution learners see is
    stored as text of its own: run as a learner would paste it, it must pass, so that it cannot go stale."""
    ex = REGISTRY[key]
    namespace = {"np": np}
    exec(ex.solution, namespace)
    name = ex.signature.split("(")[0]
    assert "**" not in ex.solution.split(")")[0] and "mistake" not in ex.solution  # the learner's signature, no flags
    assert check(key, namespace[name]).status == CORRECT, check(key, namespace[name]).message
