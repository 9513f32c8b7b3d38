"""The routes an adversary found around the checkers of the week's five exercises (05-network-backward, 09-bubble,
03-grad-check, 02-hvp, 07-stochastic-rounding), each closed once for every exercise where it was general: no
``__wrapped__`` to call, no expected value in a frame the learner's code can reach, a fresh copy of the arguments
for every call, any exception reported, PyTorch's backward kernels refused; then what each of the five says."""
import decimal
import fractions
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


# --- 05-network-backward -----------------------------------------------------------------------------------------
def test_05_refuses_the_other_exercises_answers_and_the_course_s_wrong_versions():
    from haaw.course.exercises import nb03, nb04, nb05

    def from_siblings(s):
        grads = dict(zip(ORDER, network_backward(s)))
        _, grads["dlogits"] = nb03.cross_entropy_forward_backward(np.array(s.logits), np.array(s.y))
        grads["dhbn"] = nb04.tanh_backward(np.array(s.h), grads["dh"])
        return tuple(grads[n] for n in ORDER)

    def from_a_variant(s):
        return nb05._network_variant()(s)

    def from_a_mistake(s):
        return REGISTRY["05-network-backward"].mistakes[0].code(s)

    for fn in (from_siblings, from_a_variant, from_a_mistake):
        message = check("05-network-backward", fn).message
        assert "not its own work" in message, (fn.__name__, message)
    assert check("05-network-backward", network_backward).status == CORRECT


def test_05_case_1_s_note_is_said_only_of_a_wrong_dC():
    note = "token 0 is used three times"

    def tanh_slope_from_its_input(s):
        grads = list(network_backward(s))
        grads[4] = grads[3] * (1 - s.hbn ** 2)
        return tuple(grads)

    def repeats_overwritten(s):
        grads = list(network_backward(s))
        dC = np.zeros_like(s.C)
        dC[s.idx] += grads[10]
        return (*grads[:11], dC)

    assert note not in check("05-network-backward", tanh_slope_from_its_input).message
    assert note in check("05-network-backward", repeats_overwritten).message


def test_05_a_right_float32_answer_summed_in_another_order_passes():
    """B = 2 examples of one token: dW1 is about 1e-14, from terms of 100, and every float32 answer is rounding."""
    def with_loops(s):  # dh by a triple loop, and every gradient after it from that dh
        grads = dict(zip(ORDER, network_backward(s)))
        dh = np.zeros_like(s.h)
        for b in range(s.h.shape[0]):
            for i in range(s.h.shape[1]):
                for j in range(s.W2.shape[1]):
                    dh[b, i] += grads["dlogits"][b, j] * s.W2[i, j]
        dhbn = dh * (1 - s.h ** 2)
        g = dhbn * s.gamma
        dhpre = (g - g.mean(0) - s.hhat * (g * s.hhat).mean(0)) / s.bn_sigma
        demb_hat = (dhpre @ s.W1.T).reshape(s.emb_hat.shape)
        demb = (demb_hat - demb_hat.mean(-1, keepdims=True)
                - s.emb_hat * (demb_hat * s.emb_hat).mean(-1, keepdims=True)) / s.emb_sigma
        dC = np.zeros_like(s.C)
        np.add.at(dC, s.idx, demb)
        grads.update(dh=dh, dhbn=dhbn, dgamma=(dhbn * s.hhat).sum(0), dbeta=dhbn.sum(0), dhpre=dhpre,
                     dW1=s.flat.T @ dhpre, demb_hat=demb_hat, demb=demb, dC=dC)
        return tuple(grads[n] for n in ORDER)

    assert check("05-network-backward", with_loops).status == CORRECT


# --- 09-bubble ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda s, m: fractions.Fraction(s - 1, m + s - 1),
    lambda s, m: decimal.Decimal(s - 1) / decimal.Decimal(m + s - 1),
    lambda s, m: np.array(s - 1) / np.array(m + s - 1),
    lambda s, m: np.float32((s - 1) / (m + s - 1)),
    lambda s, m: np.asarray((s - 1) / (m + s - 1)),
], ids=["Fraction", "Decimal", "0-d array", "NumPy scalar", "0-d array of a float"])
def test_09_any_single_number_is_an_answer(make):
    assert check("09-bubble", make).status == CORRECT


def test_09_a_torch_number_and_a_percentage():
    torch = pytest.importorskip("torch")
    assert check("09-bubble", lambda s, m: torch.tensor(s - 1.0) / (m + s - 1)).status == CORRECT
    message = check("09-bubble", lambda s, m: 100 * (s - 1) / (m + s - 1)).message
    assert "This looks like a percentage" in message and "a share between 0 and 1" in message


# --- 07-stochastic-rounding -----------------------------------------------------------------------------------------
def _rounding(x, u):
    from haaw.amp import dtype

    bf16 = dtype("bfloat16")
    nearest = x.astype(bf16)
    down = np.where(nearest.astype(np.float32) <= x, nearest, np.nextafter(nearest, bf16.type(-np.inf)))
    up = np.where(nearest.astype(np.float32) >= x, nearest, np.nextafter(nearest, bf16.type(np.inf)))
    lo, hi = down.astype(np.float64), up.astype(np.float64)
    p = np.where(hi > lo, (x - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0)
    return np.where(u < p, up, down).astype(bf16)


def test_07_a_torch_bf16_tensor_is_read_and_odd_returns_are_named():
    torch = pytest.importorskip("torch")

    def as_torch(x, u):
        return torch.from_numpy(_rounding(x, u).astype(np.float32)).to(torch.bfloat16)

    assert check("07-stochastic-rounding", as_torch).status == CORRECT
    def a_str(x, u):
        return "bf16"

    def a_dict(x, u):
        return {"x": x}

    def a_generator(x, u):
        return (v for v in x)

    def nans(x, u):
        return np.full(x.shape, np.nan).astype(_rounding(x, u).dtype)

    def infs(x, u):
        return np.full(x.shape, np.inf).astype(_rounding(x, u).dtype)

    said = {"a str": a_str, "a dict": a_dict, "a generator": a_generator, "nan": nans, "inf": infs}
    for words, fn in said.items():
        message = check("07-stochastic-rounding", fn).message
        assert words in message and "shape (1,), not ()" not in message, (words, message)


def test_07_known_limit_a_probability_rounded_to_fp16_passes():
    """64 draws tell the probability of going up to 1/64: one computed in fp16 (11 bits) cannot be told apart; one
    rounded to bf16 (8 bits) can. A known limit, written in _run_rounding's docstring."""
    from haaw.amp import dtype

    bf16 = dtype("bfloat16")

    def p_in(fmt):
        def fn(x, u):
            nearest = x.astype(bf16)
            down = np.where(nearest.astype(np.float32) <= x, nearest, np.nextafter(nearest, bf16.type(-np.inf)))
            up = np.where(nearest.astype(np.float32) >= x, nearest, np.nextafter(nearest, bf16.type(np.inf)))
            lo, hi = down.astype(np.float64), up.astype(np.float64)
            p = np.where(hi > lo, (x - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0).astype(fmt).astype(np.float64)
            return np.where(u < p, up, down).astype(bf16)
        return fn

    assert check("07-stochastic-rounding", p_in(np.float16)).status == CORRECT
    assert check("07-stochastic-rounding", p_in(bf16)).status == WRONG


def test_07_a_change_of_x_in_place_is_refused():
    def zeroes_x(x, u):
        result = _rounding(x, u)
        x[...] = 0
        return result

    message = check("07-stochastic-rounding", zeroes_x).message
    assert "changes one of its inputs in place" in message and "x and u are the caller's arrays" in message


# --- 03-grad-check --------------------------------------------------------------------------------------------------
def test_03_x_nudged_in_place_is_told_to_nudge_a_copy():
    def nudges_x_and_puts_it_back(f, x, grad, coords, h):
        errors = []
        for i in coords:
            old = x[i]
            x[i] = old + h
            f_plus = f(x.copy())
            x[i] = old - h
            f_minus = f(x.copy())
            x[i] = old
            numeric = (f_plus - f_minus) / (2 * h)
            scale = max(abs(grad[i]), abs(numeric))
            errors.append(abs(grad[i] - numeric) / scale if scale else 0.0)
        return np.array(errors)

    message = check("03-grad-check", nudges_x_and_puts_it_back).message
    assert "nudge a copy" in message and "a gradient" not in message, message


def test_03_a_one_sided_difference_from_below_is_named():
    def from_below(f, x, grad, coords, h):
        errors = []
        for i in coords:
            minus = x.copy()
            minus[i] -= h
            numeric = (f(x) - f(minus)) / h
            scale = max(abs(grad[i]), abs(numeric))
            errors.append(abs(grad[i] - numeric) / scale if scale else 0.0)
        return np.array(errors)

    assert "This looks like a one-sided difference, from below" in check("03-grad-check", from_below).message
