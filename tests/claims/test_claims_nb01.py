"""The claims of notebook 01: each figure or causal claim the notebook states, asserted."""
import warnings
from fractions import Fraction

import pytest

from haaw import Value
from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.nb01 import mul_local, pow_local
from haaw.course.nb01 import tiny_chain_step
from haaw.engine import plugins
from haaw.tools import gradcheck


def test_01_tiny_chain_numbers_from_the_engine_and_finite_differences():
    s = tiny_chain_step(w=2.0, x=3.0, lr=0.01)
    assert (s.y, s.loss, s.dL_dy, s.dy_dw, s.dL_dw) == (6.0, 36.0, 12.0, 3.0, 36.0)
    report = gradcheck(lambda w: (w * 3.0) ** 2, 2.0)
    assert report.ok
    assert report.rows[0].numeric.item() == pytest.approx(36.0, rel=1e-9)


def test_01_one_sgd_step_moves_w_to_1_64_and_lowers_the_loss():
    s = tiny_chain_step(w=2.0, x=3.0, lr=0.01)
    assert s.w_new == pytest.approx(1.64, abs=1e-12)
    assert s.loss_new == pytest.approx(24.2064) and s.loss_new < s.loss


def _steps(lr, n, w=2.0, x=3.0):
    """w after each of n gradient-descent steps on L = (w·x)², every gradient from the engine."""
    ws = [w]
    for _ in range(n):
        v = Value(ws[-1])
        ((v * x) ** 2).backward()
        ws.append(ws[-1] - lr * v.grad)
    return ws


@pytest.mark.parametrize("x", [3.0, 1.5])
def test_01_a_step_overshoots_above_one_over_2x2_and_diverges_above_one_over_x2(x):
    overshoot, diverge = 1 / (2 * x * x), 1 / (x * x)  # 1/18 and 1/9 for x = 3
    for lr in (0.5 * overshoot, 0.99 * overshoot):
        ws = _steps(lr, 6, x=x)
        assert all(0 < b < a for a, b in zip(ws, ws[1:])), lr  # same side, closer every step
    assert _steps(overshoot, 1, x=x)[1] == pytest.approx(0.0, abs=1e-12)  # lands on the minimum
    for lr in (1.01 * overshoot, 0.5 * (overshoot + diverge), 0.99 * diverge):
        ws = _steps(lr, 6, x=x)
        assert all(b * a < 0 for a, b in zip(ws, ws[1:])), lr  # w changes sign at every step: overshoots
        assert all(abs(b) < abs(a) for a, b in zip(ws, ws[1:])), lr  # and still converges
    ws = _steps(diverge, 6, x=x)
    assert [abs(v) for v in ws] == pytest.approx([2.0] * 7)  # bounces between ±2
    for lr in (1.01 * diverge, 1.2 * diverge):
        ws = _steps(lr, 6, x=x)
        assert all(abs(b) > abs(a) for a, b in zip(ws, ws[1:])), lr  # diverges
        assert all((b * x) ** 2 > (a * x) ** 2 for a, b in zip(ws, ws[1:]))  # the loss grows with it


def test_01_the_tiny_chain_through_the_learner_s_mul_and_pow_gives_36():
    calls = []

    def watched(fn):
        def run(*args):
            calls.append(fn.__name__)
            return fn(*args)
        return run

    with plugins.use(mul=watched(mul_local), pow=watched(pow_local)):
        w, x = Value(2.0), Value(3.0)
        loss = (w * x) ** 2
        loss.backward()
    assert calls == ["mul_local", "pow_local"]  # the functions really ran in the engine's place
    assert (loss.data, w.grad, x.grad) == (36.0, 36.0, 24.0)
    with plugins.use(mul=lambda a, b: (a * b, (a, b))):  # a wrong local derivative changes dL/dw
        w, x = Value(2.0), Value(3.0)
        ((w * x) ** 2).backward()
    assert w.grad == 24.0 != 36.0


def test_01_exercise_1_s_numbers_tell_the_gradient_from_the_loss():
    w, x = Value(3.0), Value(2.0)
    y = w * x
    loss = y**2
    loss.backward()
    assert (y.data, loss.data, y.grad, w.grad, x.grad) == (6.0, 36.0, 12.0, 24.0, 36.0)
    assert loss.data != w.grad  # the loss is no longer a right answer
    assert check("01-dL/dw", w.grad).status == CORRECT
    assert check("01-dL/dw", loss.data).status == WRONG and "is L" in check("01-dL/dw", loss.data).message
    # the named mistakes are what their messages say they are
    assert 2 * x.data**2 == 8 and 2 * w.data**2 == 18 and 2 * w.data == y.data == 6
    assert (2 * w.data) * x.data**2 == 24  # dL/dw from L = w²x² directly


@pytest.mark.upstream
def test_01_the_central_difference_has_no_truncation_error_on_a_parabola_only_rounding_error():
    def loss_at(w):
        return (w * 3) ** 2

    for h in (Fraction(1, 10), Fraction(1, 1000), Fraction(1, 10**9)):  # exact arithmetic: exactly 36
        assert (loss_at(2 + h) - loss_at(2 - h)) / (2 * h) == 36
    hs = (1e-1, 1e-3, 1e-5, 1e-6, 1e-7, 1e-9)
    central = [abs((loss_at(2 + h) - loss_at(2 - h)) / (2 * h) - 36) for h in hs]
    one_sided = [abs((loss_at(2 + h) - loss_at(2)) / h - 36) for h in hs]
    assert all(0 < e for e in central) and central[0] < 1e-12  # tiny but not zero: rounding
    assert all(a < b for a, b in zip(central, central[1:]))  # and it grows as h shrinks
    assert all(a > b for a, b in zip(one_sided[:5], one_sided[1:5]))  # one-sided: falls with h ...
    assert one_sided[5] > one_sided[4]  # ... until rounding takes over
    assert one_sided[0] == pytest.approx(9 * hs[0])  # in proportion to h: the error is 9h exactly
    # gradcheck's h = 1e-6: the central formula is off by rounding alone, a few billionths
    assert 1e-9 < central[3] < 1e-8


def test_01_backward_starts_at_the_loss_with_1_and_writes_gradients_only(stored_output):
    """Backward is not the model run in reverse: it starts at the output with dL/dL = 1, but no value of the forward
    pass changes and no input is rebuilt; only .grad is written."""
    w, x = Value(2.0), Value(3.0)
    y = w * x
    loss = y**2
    before = [v.data for v in (w, x, y, loss)]
    loss.backward()
    assert loss.grad == 1.0
    assert [v.data for v in (w, x, y, loss)] == before
    assert (y.grad, w.grad, x.grad) == (12.0, 36.0, 24.0)
    printed = stored_output("01", "before = [v.data for v in (w, x, y, L)]")
    assert "dL/dL = 1\n" in printed and "unchanged" in printed and "CHANGED" not in printed


def test_01_the_central_difference_s_truncation_error_is_h2_on_a_cubic():
    def cube(w):
        return w**3

    for h in (Fraction(1, 10), Fraction(1, 100), Fraction(1, 1000)):  # exact arithmetic
        assert (cube(2 + h) - cube(2)) / h - 12 == 6 * h + h**2
        assert (cube(2 + h) - cube(2 - h)) / (2 * h) - 12 == h**2


def test_01_gradcheck_s_ok_is_numpy_s_allclose_test_with_its_default_tolerances():
    for off, ok in ((1e-6, True), (5e-6, True), (2e-5, False), (1e-4, False)):
        # a multiplication whose backward is wrong by a relative `off`: backward 3·(1 + off), finite diff. 3
        with plugins.use(mul=lambda a, b, off=off: (a * b, (b * (1 + off), a * (1 + off)))):
            report = gradcheck(lambda w: w * 3.0, 2.0)
        assert report.ok is ok, off
        a, n = report.rows[0].analytic.item(), report.rows[0].numeric.item()
        assert (abs(a - n) <= 1e-8 + 1e-5 * abs(n)) is ok
    assert gradcheck(lambda w, x: (w * x) ** 2, 2.0, 3.0).ok
    # below about 1e-3 the fixed 1e-8 decides: a gradient of 1e-9, twice what it should be, still passes
    with plugins.use(mul=lambda a, b: (a * b, (2 * b, 2 * a))):
        report = gradcheck(lambda w: w * 1e-9, 2.0)
    assert report.ok and report.rows[0].analytic.item() == pytest.approx(2 * report.rows[0].numeric.item())
    with plugins.use(mul=lambda a, b: (a * b, (2 * b, 2 * a))):
        assert not gradcheck(lambda w: w * 1e-3, 2.0).ok  # at 1e-3 the same bug is caught


@pytest.mark.upstream
def test_01_pytorch_fills_grad_for_leaves_only_unless_retain_grad():
    torch = pytest.importorskip("torch")

    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    y = w * 3.0
    (y**2).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns when a non-leaf's .grad is read
        assert y.grad is None and w.grad.item() == 36.0
    w.grad = None
    y = w * 3.0
    y.retain_grad()
    (y**2).backward()
    assert y.grad.item() == 12.0 and w.grad.item() == 36.0


def test_01_the_power_checker_names_each_wrong_exponent_rule_truly():
    answers = {  # what a learner writes -> the mistake the checker must name
        "2·a, the derivative of a² only": lambda a, n: (a**n, (2 * a,)),
        "the exponent without brackets": lambda a, n: (a**n, (n * a**n - 1,)),
        "the lowered exponent as the factor": lambda a, n: (a**n, ((n - 1) * a ** (n - 1),)),
        "the factor n forgotten": lambda a, n: (a**n, (a ** (n - 1),)),
        "the exponent kept as it was": lambda a, n: (a**n, (n * a**n,)),
    }
    for name, fn in answers.items():
        feedback = check("01-pow-local", fn)
        assert feedback.status == WRONG and f"This looks like {name}" in feedback.message, (name, feedback.message)
    assert check("01-pow-local", lambda a, n: (a**n, (n * a ** (n - 1),))).status == CORRECT


def test_01_the_multiplication_checker_explains_the_derivative_that_is_wrong():
    both_b = check("01-mul-local", lambda a, b: (a * b, (b, b))).message
    assert "d(a·b)/db: wrong values" in both_b and "d(a·b)/db = a" in both_b
    both_a = check("01-mul-local", lambda a, b: (a * b, (a, a))).message
    assert "d(a·b)/da: wrong values" in both_a and "d(a·b)/da = b" in both_a


def test_01_what_an_engine_keeps_for_backward_local_derivatives_here_inputs_in_array_engines():
    """Automatic differentiation is defined for every engine; what each keeps is its own design: haaw's scalar
    engine stores each local derivative as a number, haaw's matrix engine and PyTorch store the inputs and
    form the products during backward, because a table of every local derivative would dwarf the inputs."""
    import numpy as np

    from haaw import Tensor

    w, x = Value(2.0), Value(3.0)
    y = w * x
    loss = y**2
    assert y._local == (3.0, 2.0) and loss._local == (12.0,)  # numbers, computed in the forward pass
    X, W = np.arange(12.0).reshape(4, 3), np.ones((3, 2))
    tx, tw = Tensor(X, requires_grad=True), Tensor(W, requires_grad=True)
    Y = tx @ tw
    saved = Y._ctx.saved
    assert saved["a"] is tx.data and saved["b"] is tw.data  # the inputs themselves, no derivative formed yet
    assert all(not isinstance(v, np.ndarray) or v.size <= X.size for v in saved.values())
    jacobian_entries = Y.data.size * X.size  # dY/dX, every output entry against every input entry
    assert jacobian_entries == 8 * 12 and jacobian_entries == X.size * Y.data.size > 4 * X.size


@pytest.mark.upstream
def test_01_pytorch_s_matrix_product_also_keeps_its_inputs_for_backward():
    import numpy as np

    torch = pytest.importorskip("torch")
    X, W = np.arange(12.0).reshape(4, 3), np.ones((3, 2))
    a = torch.tensor(X, requires_grad=True)
    b = torch.tensor(W, requires_grad=True)
    out = a @ b
    assert torch.equal(out.grad_fn._saved_self, a) and torch.equal(out.grad_fn._saved_mat2, b)  # PyTorch: inputs too
