"""The routes an adversary found around the checkers of the week's five exercises (05-network-backward, 09-bubble,
03-grad-check, 02-hvp, 07-stochastic-rounding), each closed once for every exercise where it was general: no
``__wrapped__`` to call, no expected value in a frame the learner's code can reach, a fresh copy of the arguments
for every call, any exception reported, PyTorch's backward kernels refused; then what each of the five says."""
import sys

import numpy as np
import pytest

from haaw.course import nb09 as course_nb09
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.code import CodeExercise
from haaw.course.exercises.registry import CORRECT, WRONG
from haaw.engine import guard
from haaw.engine.forward_mode import Dual

ORDER = ("dlogits", "dW2", "db2", "dh", "dhbn", "dgamma", "dbeta", "dhpre", "dW1", "demb_hat", "demb", "dC")


def network_backward(s):
    """The whole network's backward, as a learner would write it (the notebook's solution)."""
    B = s.idx.shape[0]
    onehot = np.zeros_like(s.probs)
    onehot[np.arange(B), s.y] = 1
    dlogits = (s.probs - onehot) / B
    dW2, db2, dh = s.h.T @ dlogits, dlogits.sum(axis=0), dlogits @ s.W2.T
    dhbn = dh * (1 - s.h ** 2)
    dgamma, dbeta = (dhbn * s.hhat).sum(axis=0), dhbn.sum(axis=0)
    g = dhbn * s.gamma
    dhpre = (g - g.mean(axis=0) - s.hhat * (g * s.hhat).mean(axis=0)) / s.bn_sigma
    dW1 = s.flat.T @ dhpre
    demb_hat = (dhpre @ s.W1.T).reshape(s.emb_hat.shape)
    g = demb_hat
    demb = (g - g.mean(axis=-1, keepdims=True) - s.emb_hat * (g * s.emb_hat).mean(axis=-1, keepdims=True)) / s.emb_sigma
    dC = np.zeros_like(s.C)
    np.add.at(dC, s.idx, demb)
    return dlogits, dW2, db2, dh, dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC


def bubble(stages, micro):
    return (stages - 1) / (micro + stages - 1)


# --- general: every exercise ---------------------------------------------------------------------------------------
def test_no_reference_and_no_refusable_helper_has_a_wrapped_to_call():
    """``reference.__wrapped__`` was the reference itself, unrefused: every check passed through it."""
    for key, ex in REGISTRY.items():
        if isinstance(ex, CodeExercise) and not isinstance(ex.reference, type):
            assert not hasattr(ex.reference, "__wrapped__"), key
    assert not hasattr(course_nb09.pipeline_schedule, "__wrapped__")

    def through_wrapped(stages, micro):
        return REGISTRY["09-bubble"].reference.__wrapped__(stages, micro)

    def through_the_simulator(stages, micro):
        return course_nb09.pipeline_schedule.__wrapped__(stages, micro)["bubble"]

    def through_unguarded(stages, micro):
        return guard.unguarded(REGISTRY["09-bubble"].reference)(stages, micro)

    for fn in (through_wrapped, through_the_simulator, through_unguarded):
        assert check("09-bubble", fn).status == WRONG, fn.__name__
    assert "guard.unguarded" in check("09-bubble", through_unguarded).message


def test_the_course_can_still_read_a_reference_s_source_and_signature():
    import inspect

    ex = REGISTRY["09-bubble"]
    assert "def bubble_fraction" in ex.solution
    assert list(inspect.signature(ex.reference).parameters) == ["stages", "micro"]
    assert guard.unguarded(ex.reference)(4, 8) == pytest.approx(3 / 11)


def _values_in_frames(frame, wanted) -> list:
    """The names of the locals, in ``frame`` and every frame above it, whose value is ``wanted`` (or holds it)."""
    found = []
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            for item in (value if isinstance(value, (tuple, list)) else (value,)):
                if not isinstance(item, (float, np.floating, np.ndarray)) or isinstance(item, bool):
                    continue
                try:
                    if np.shape(item) == np.shape(wanted) and np.allclose(np.asarray(item, dtype=float), wanted):
                        found.append(f"{frame.f_code.co_name}.{name}")
                except (TypeError, ValueError):
                    pass
        frame = frame.f_back
    return found


@pytest.mark.parametrize("key", ["09-bubble", "03-grad-check"])
def test_no_frame_holds_the_expected_value_while_the_learner_s_function_runs(key):
    """A learner's function could walk up its callers' frames and return the checker's local ``right``."""
    seen = []
    if key == "09-bubble":
        def answer(stages, micro):
            right = bubble(stages, micro)
            if right:  # 0 is everywhere
                seen.extend(_values_in_frames(sys._getframe(1), right))
            return right
    else:
        solution = guard.unguarded(REGISTRY[key].reference)

        def answer(f, x, grad, coords, h):
            right = solution(f, x, grad, coords, h)
            if np.any(right):
                seen.extend(_values_in_frames(sys._getframe(1), right))
            return right
    assert check(key, answer).status == CORRECT
    assert not seen, seen

    def from_the_frames(*args):  # the adversary's version: the first local called right or expected, above it
        frame = sys._getframe(1)
        while frame is not None:
            for name in ("right", "expected"):
                if name in frame.f_locals and frame.f_locals[name] is not None:
                    value = frame.f_locals[name]
                    return float(value) if key == "09-bubble" else value[0]
            frame = frame.f_back
        return 0.0

    assert check(key, from_the_frames).status == WRONG


def test_each_call_gets_fresh_arguments_and_a_change_in_place_is_refused():
    """02-hvp's lists were the checker's own: x.clear() broke the next case ("a bug in the course")."""
    def clears_x(grad, x, v):
        result = [g.tangent for g in grad(*[Dual(a, b) for a, b in zip(x, v)])]
        x.clear()
        return result

    message = check("02-hvp", clears_x).message
    assert "bug in the course" not in message and "changes argument 2 (a list) in place" in message, message

    def pops_v(grad, x, v):
        return [g.tangent for g in grad(*[Dual(a, v.pop(0)) for a in x])]

    assert "changes argument 3 (a list) in place" in check("02-hvp", pops_v).message

    def h_times_x_and_zeroes_x(grad, x, v):  # a named mistake that also changes its input: named for the mistake
        result = [g.tangent for g in grad(*[Dual(a, a) for a in x])]
        x[:] = [0.0] * len(x)
        return result

    message = check("02-hvp", h_times_x_and_zeroes_x).message
    assert "This looks like x as the tangent" in message and "It also changes argument 2" in message, message


@pytest.mark.parametrize("error", [SystemExit(3), GeneratorExit(), type("Custom", (BaseException,), {})()])
def test_any_exception_from_the_learner_s_code_is_reported(error):
    def raises(stages, micro):
        raise error

    feedback = check("09-bubble", raises)
    assert feedback.status == WRONG and f"raised {type(error).__name__}" in feedback.message


def test_pytorch_s_backward_kernels_and_grad_fn_nodes_are_refused():
    torch = pytest.importorskip("torch")

    def kernel(y, G):
        return torch.ops.aten.tanh_backward(torch.tensor(np.array(G)), torch.tensor(np.array(y))).numpy()

    def node(y, G):
        with torch.enable_grad():
            x = torch.tensor(np.arctanh(y)).requires_grad_()
            out = torch.tanh(x)
            return out.grad_fn(torch.tensor(np.array(G))).detach().numpy()

    for fn in (kernel, node):
        message = check("04-tanh-backward", fn).message
        assert "not its own work" in message and "PyTorch's autograd" in message, (fn.__name__, message)
    # outside check, PyTorch's autograd runs as ever (a cross-check cell)
    t = torch.tensor([0.5], requires_grad=True)
    torch.tanh(t).sum().backward()
    assert t.grad is not None and torch.ops.aten.tanh_backward(torch.ones(1), torch.tanh(t)).shape == (1,)

    def plain_torch(y, G):  # forward operators only: passes
        return (torch.tensor(np.array(G)) * (1 - torch.tensor(np.array(y)) ** 2)).numpy()

    assert check("04-tanh-backward", plain_torch).status == CORRECT
