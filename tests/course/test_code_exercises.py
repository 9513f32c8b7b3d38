"""Every code exercise: its reference passes, each named mistake is diagnosed by name, and no input
(code that raises, loops, recurses or returns garbage) makes a checker raise. The time limit that stops
code that loops is tested in test_watchdog.py."""
import numpy as np
import pytest

from haaw import Tensor
from haaw.course.exercises import REGISTRY, check, hint, passed, solution, yours
from haaw.course.exercises import code as code_module
from haaw.course.exercises.code import CodeExercise
from haaw.course.exercises.core import CORRECT, NOT_ATTEMPTED, UNREADABLE, WRONG
from haaw.engine import plugins
from haaw.engine import guard

CODE = sorted(k for k, ex in REGISTRY.items() if isinstance(ex, CodeExercise))
MISTAKES = [(k, m) for k in CODE for m in REGISTRY[k].mistakes]


def test_every_notebook_has_a_code_exercise_and_there_are_at_least_twelve():
    assert len(CODE) >= 12
    assert {k[:2] for k in CODE} == {f"{n:02d}" for n in range(1, 11)}


@pytest.mark.parametrize("key", CODE)
def test_the_reference_passes_and_counts_as_passed(key):
    ex = REGISTRY[key]
    feedback = check(key, guard.unguarded(ex.reference))
    assert feedback.status == CORRECT, feedback.message
    assert passed(key, guard.unguarded(ex.reference)) and feedback.message.startswith("✓ Correct")
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


WAITS = ("loops", "swallows")  # code that never returns: its check waits out the time limit (slow tier)


@pytest.mark.parametrize("key", CODE)
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k in WAITS else k
                                  for k in sorted(GARBAGE_FUNCTIONS)])
def test_learner_code_that_misbehaves_gets_a_message_never_an_exception(key, kind, monkeypatch):
    # code that never returns waits out the limit: keep it short (17 exercises × 2 such kinds); the rest
    # keep the real limit, so that a busy machine cannot turn a RecursionError into a time-out
    if kind in WAITS:
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

    tanh_backward = guard.unguarded(tanh_backward)  # the course's code, as a learner would have typed it

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

    relu_backward, tanh_backward = guard.unguarded(relu_backward), guard.unguarded(tanh_backward)

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

    tanh_backward = guard.unguarded(tanh_backward)  # the course's code, as a learner would have typed it

    state = {"right": True}

    def flaky(y, G):
        return tanh_backward(y, G) * (1.0 if state["right"] else 2.0)

    assert check("04-tanh-backward", flaky).status == CORRECT and passed("04-tanh-backward", flaky)
    state["right"] = False
    assert check("04-tanh-backward", flaky).status == WRONG and not passed("04-tanh-backward", flaky)


@pytest.mark.slow  # 2 s: it recomputes the stored numbers in PyTorch
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


@pytest.mark.slow  # it waits for the time limit
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

    message = check("04-tanh-backward", tanh_backward).message  # its domain says dx keeps the dtype: that first
    assert "Case 4 of " in message and "dx is float64, but the inputs are float32" in message

    reference = guard.unguarded(REGISTRY["03-cross-entropy"].reference)  # refused if unwrapped inside check

    def cross_entropy_forward_backward(logits, targets):  # no promise of the dtype here: told when it is also off
        loss, dlogits = reference(logits, targets)
        return loss, dlogits if logits.dtype == np.float64 else dlogits.astype(np.float64) + 1e-3

    message = check("03-cross-entropy", cross_entropy_forward_backward).message
    assert "dlogits is float64, but it should be float32, like the inputs (float32)" in message


def test_a_float32_answer_is_held_to_float32_s_tolerance_even_where_the_reference_is_float64(monkeypatch):
    from haaw.course.exercises import nb04

    reference = guard.unguarded(REGISTRY["04-tanh-backward"].reference)
    monkeypatch.setattr(REGISTRY["04-tanh-backward"], "reference",
                        # on float32 inputs: works in float64 and rounds differently, 1e-5 apart (float32's precision)
                        lambda y, G: reference(y.astype(np.float64), G.astype(np.float64)) * (1 + 1e-5)
                        if y.dtype == np.float32 else reference(y, G))
    assert check("04-tanh-backward", guard.unguarded(nb04.tanh_backward)).status == CORRECT


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
