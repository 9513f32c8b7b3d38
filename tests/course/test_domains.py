"""Every code exercise declares its domain (domain.py), and check draws seeded cases from it after the teaching cases:
the same cases every time, every entry of every axis taken, the course's solutions passing them, the outputs that
keep their inputs' dtype held to it, and tiny or huge values compared at their own scale. Each wrong version below,
written as a learner writes it, passes the teaching cases alone and is refused by a drawn one."""
import math

import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises import code as code_module
from haaw.course.exercises.code import Case, CodeExercise
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.domain import AXES, DRAWN, HUGE, TINY, VALUES, Domain, sample
from haaw.engine import guard

CODE = {key: ex for key, ex in REGISTRY.items() if isinstance(ex, CodeExercise)}


def test_every_code_exercise_declares_a_domain():
    assert len(CODE) == 28
    assert [key for key, ex in CODE.items() if ex.domain is None] == []


@pytest.mark.parametrize("key", CODE)
def test_the_drawn_cases_are_the_same_on_every_check_and_come_after_the_teaching_cases(key):
    ex = CODE[key]
    first, again = ex.all_cases(), ex.all_cases()
    teaching = ex.cases()
    assert [c.label for c in first[:len(teaching)]] == [c.label for c in teaching]
    drawn = first[len(teaching):]
    assert drawn and all(c.kind == DRAWN for c in drawn)
    assert [c.label for c in first] == [c.label for c in again]
    for a, b in zip(first, again):
        assert _same_arguments(a.args, b.args), a.label


def _same_arguments(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_arguments, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_arguments(a[k], b[k]) for k in a)
    if callable(a) and getattr(a, "__name__", "") != "build":  # a function of the case (f, its gradient)
        return getattr(a, "__qualname__", None) == getattr(b, "__qualname__", None)
    if callable(a):  # a graph's build(): the same graph, by its gradients' labels and values
        (ra, wa), (rb, wb) = a(), b()
        return ra.data == rb.data and [n.data for n in wa] == [n.data for n in wb]
    return a == b or (a != a and b != b)


@pytest.mark.parametrize("key", CODE)
def test_the_drawn_cases_take_every_entry_of_every_axis(key):
    domain = CODE[key].domain
    picks = domain.picks(np.random.default_rng(0))
    fields = {"ranks": "rank", "dtypes": "dtype", "values": "values", "exponents": "exponent", "counts": "count",
              "thresholds": "threshold"}
    for axis in AXES:
        declared = getattr(domain, axis)
        if declared:
            taken = {getattr(p, fields[axis]) for p in picks}
            assert taken == {np.dtype(d) if axis == "dtypes" else d for d in declared}, axis
    assert len(picks) >= max([len(getattr(domain, a)) for a in AXES])


def _solution(ex):
    """The solution shown to learners (or the reference, where it is the solution), as a learner's function."""
    reference = guard.unguarded(ex.reference)
    if not ex.solution_code:
        return reference
    namespace = dict(reference.__globals__) if not isinstance(reference, type) else {"np": np}
    exec(ex.solution_code, namespace)
    return namespace[ex.signature.split("(")[0].removeprefix("class ").strip()]


@pytest.mark.parametrize("key", CODE)
def test_the_course_s_solution_passes_the_drawn_cases(key):
    ex = CODE[key]
    feedback = check(key, _solution(ex))
    assert feedback.status == CORRECT, feedback.message
    assert f"passed all {len(ex.all_cases())} cases" in feedback.message and DRAWN in feedback.message


def test_sample_makes_each_kind_of_value_at_the_dtype_s_scale():
    rng = np.random.default_rng(1)
    for dtype in (np.float64, np.float32):
        for kind in VALUES:
            x = sample(rng, (50,), kind, dtype)
            assert x.dtype == dtype and x.shape == (50,) and np.all(np.isfinite(x))
        assert np.all(sample(rng, (50,), "negative", dtype) < 0)
        assert np.sum(sample(rng, (50,), "zero", dtype) == 0) >= 10
        tiny, huge = np.abs(sample(rng, (50,), "tiny", dtype)), np.abs(sample(rng, (50,), "huge", dtype))
        assert tiny.max() < 1e3 * TINY[np.dtype(dtype)] and huge.max() > 1e-3 * HUGE[np.dtype(dtype)]
        assert np.all(np.isfinite(huge.astype(dtype) ** 5)) and np.all(tiny.astype(dtype) ** 5 > 0)
    with pytest.raises(ValueError, match="no kind of values called 'big'"):
        sample(rng, (2,), "big")


# --- tiny and huge values: compared at their own scale ------------------------------------------------------------
def test_a_case_of_tiny_values_holds_each_output_to_its_own_size():
    ex = CODE["03-linear-backward"]
    expected = (np.full((2, 3), 1e-60), np.full((3, 3), 2.0), np.zeros(3))
    plain = Case(DRAWN, (np.ones((2, 3)),), scaled=False)
    scaled = Case(DRAWN, (np.ones((2, 3)),), scaled=True)
    (_, atol_plain), = set(code_module._tolerances(ex, plain, expected))
    (_, tiny_atol), (_, two_atol), (_, zero_atol) = code_module._tolerances(ex, scaled, expected)
    assert atol_plain == ex.atol and tiny_atol == pytest.approx(ex.atol * 1e-60) and two_atol == 2 * ex.atol
    assert zero_atol == ex.atol  # nothing to scale by: the exercise's own
    off = expected[0] * 1.1  # 10 % off, far under the plain atol
    assert code_module._same(off, expected[0], ex.rtol, atol_plain)
    assert not code_module._same(off, expected[0], ex.rtol, tiny_atol)


def test_a_drawn_case_of_tiny_or_huge_values_is_scaled_unless_its_draw_says_otherwise():
    cases = {c.detail: c for c in CODE["01-mul-local"].domain.cases("01-mul-local")}
    assert any(c.scaled for c in cases.values()) and not all(c.scaled for c in cases.values())
    assert not any(c.scaled for c in CODE["02-tanh-local"].domain.cases("02-tanh-local"))  # its draw says so


def test_an_entry_that_nearly_cancels_in_a_huge_float32_output_may_be_off_by_rounding_at_the_output_s_scale():
    """Summed in another order, float32 numbers of a million are off by about 0.1: in an entry that cancels to 1 that
    is 10 % of it, and far over atol, but nothing at the output's own scale."""
    ex = CODE["03-linear-backward"]
    expected = (np.array([3e6, -2e6, 1.0], dtype=np.float32),)
    yours = np.array([3e6, -2e6, 1.1], dtype=np.float32)
    for scaled, passes in ((True, True), (False, False)):
        case = Case(DRAWN, (np.ones(3, dtype=np.float32),), scaled=scaled)
        (tolerance,) = code_module._tolerances(ex, case, expected)
        assert code_module._same(yours, expected[0], *tolerance) is passes
    assert not code_module._same(np.array([3e6, -2e6, 1e3], dtype=np.float32), expected[0],
                                 *code_module._tolerances(ex, Case(DRAWN, (), scaled=True), expected)[0])


# --- what only a drawn case shows: each passes the teaching cases, and is refused by a drawn one ------------------
def linear_backward_one_example_as_a_row(X, W, G):
    if X.ndim == 1:  # one example: make it a batch of one
        X, G = X[None, :], G[None, :]
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)  # dX stays a row: (1, n) for an X of shape (n,)


def attention_backward_for_2d_or_4d(Q, K, V, mask, G):
    def t(A):  # "one head, or (batch, heads, T, d)"
        return A.T if A.ndim == 2 else A.transpose(0, 1, 3, 2)

    scale = Q.shape[-1] ** -0.5
    S = Q @ t(K) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    top = S.max(axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))
    total = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
    dP = G @ t(V)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
    return dS @ K * scale, t(dS) @ Q * scale, t(P) @ G


def unscale_and_clip_looking_at_the_first_and_last(grads, scale, max_norm):
    grads = [g / scale for g in grads]
    if not (np.isfinite(grads[0]).all() and np.isfinite(grads[-1]).all()):  # "the ends are where it shows"
        return grads, float("inf"), True
    norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def adam_step_with_pytorch_s_eps_typed_in(p, g, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return p - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + 1e-8), m, v  # 1e-8, not eps


ONLY_DRAWN = [
    ("03-linear-backward", linear_backward_one_example_as_a_row, "1-D", "dX has shape (1, "),
    ("05-attention-backward", attention_backward_for_2d_or_4d, "3-D", "raised ValueError"),
    ("07-unscale-then-clip", unscale_and_clip_looking_at_the_first_and_last, "in gradient 2 of 5", "found_inf"),
    ("10-adam-step", adam_step_with_pytorch_s_eps_typed_in, "eps 0.001", "wrong values"),
]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the learner's inf · 0
@pytest.mark.parametrize("key, fn, drawn, said", ONLY_DRAWN, ids=[f[1].__name__ for f in ONLY_DRAWN])
def test_what_the_teaching_cases_miss_a_drawn_case_refuses(monkeypatch, key, fn, drawn, said):
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    assert DRAWN in feedback.message and drawn in feedback.message and said in feedback.message, feedback.message
    monkeypatch.setattr(CODE[key], "domain", None)  # the teaching cases alone let it through
    assert check(key, fn).status == CORRECT


# --- the dtype kept, wherever the domain says the gradient keeps it ----------------------------------------------
def unbroadcast_summing_into_float64(g, shape):
    out = np.zeros(shape)  # float64, whatever g is
    out += g.sum(axis=tuple(range(g.ndim - len(shape))) + tuple(
        g.ndim - len(shape) + i for i, n in enumerate(shape) if n == 1), keepdims=False).reshape(shape)
    return out


def relu_backward_with_a_float_mask(y, G):
    return G * (y > 0).astype(float)  # float is float64


def tanh_backward_through_np_float64(y, G):
    return G * (np.float64(1) - y * y)


def softmax_backward_with_a_float64_sum(s, G):
    return s * (G - np.sum(G * s, axis=-1, keepdims=True, dtype=np.float64))


def layer_norm_backward_with_an_np_sqrt_of_eps(x, weight, G, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    sigma = np.sqrt(var + np.float64(eps))  # a NumPy float64 number: float32 in, float64 out
    xh, g = (x - mu) / sigma, G * weight
    dx = (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True)) / sigma
    axes = tuple(range(G.ndim - 1))
    return dx, (G * xh).sum(axis=axes), G.sum(axis=axes)


def clip_grad_norm_by_an_np_factor(grads, max_norm):
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))  # a NumPy float64
    return [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads], float(norm)


def unscale_and_clip_by_an_np_factor(grads, scale, max_norm):
    grads = [g / scale for g in grads]
    if not all(np.isfinite(g).all() for g in grads):
        return grads, float("inf"), True
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    return [g * min(1.0, max_norm / (norm + 1e-6)) for g in grads], float(norm), False


CHANGED_DTYPE = [
    ("03-unbroadcast", unbroadcast_summing_into_float64, "the result is float64, but the inputs are float32"),
    ("04-relu-backward", relu_backward_with_a_float_mask, "dx is float64, but the inputs are float32"),
    ("04-tanh-backward", tanh_backward_through_np_float64, "dx is float64, but the inputs are float32"),
    ("05-softmax-backward", softmax_backward_with_a_float64_sum, "dz is float64, but the inputs are float32"),
    ("05-layer-norm-backward", layer_norm_backward_with_an_np_sqrt_of_eps, "dx is float64, but the inputs are float32"),
    ("04-clip-grad-norm", clip_grad_norm_by_an_np_factor,
     "the clipped gradients is float64, but the inputs are float32"),
    ("07-unscale-then-clip", unscale_and_clip_by_an_np_factor, "the gradients is float64, but the inputs are float32"),
]


@pytest.mark.parametrize("key, fn, said", CHANGED_DTYPE, ids=[c[1].__name__ for c in CHANGED_DTYPE])
def test_a_gradient_that_does_not_keep_the_inputs_dtype_is_refused_at_the_first_case_it_changes(key, fn, said):
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    assert said in feedback.message and "float32" in feedback.message.split(":")[0], feedback.message
    assert "a NumPy float64 number as a factor" in feedback.message


def test_a_python_number_for_a_result_of_no_axes_keeps_whatever_dtype_it_meets():
    def unbroadcast(g, shape):
        if shape == ():
            return float(g.sum())  # a Python float has no dtype: the engine's array gives it one
        while g.ndim > len(shape):
            g = g.sum(axis=0)
        return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)

    feedback = check("03-unbroadcast", unbroadcast)
    assert feedback.status == CORRECT, feedback.message


def test_the_values_come_first_where_the_dtype_is_not_what_made_them_wrong():
    def relu_backward(y, G):  # float64 on float32 inputs, and wrong on every case: the mask lets dead units through
        return G * (y >= 0).astype(float)

    feedback = check("04-relu-backward", relu_backward)
    assert feedback.status == WRONG and "Case 1 of" in feedback.message
    assert "This looks like y >= 0 as the mask" in feedback.message, feedback.message


def test_a_domain_without_keeps_dtype_holds_no_output_to_a_dtype():
    domain = Domain(lambda rng, pick: Case(DRAWN, (np.ones(2, dtype=np.float32),)), size=1)
    ex = CodeExercise(key="a test's exercise", minutes=4, question="", signature="f(x) -> y", reference=lambda x: x * 2,
                      cases=lambda: [Case("float32", (np.ones(3, dtype=np.float32),))], outputs=("y",), domain=domain)
    assert code_module.check_code(ex, lambda x: (x * 2).astype(np.float64)).status == CORRECT
    held = CodeExercise(key="a test's exercise", minutes=4, question="", signature="f(x) -> y", reference=lambda x: x * 2,
                        cases=ex.cases, outputs=("y",), domain=Domain(domain.draw, size=1, keeps_dtype=("y",)))
    assert "y is float64, but the inputs are float32" in code_module.check_code(
        held, lambda x: (x * 2).astype(np.float64)).message
