"""The claims of notebook 01: each figure or causal claim the notebook states, asserted."""
import pytest

from haaw.course.nb01 import tiny_chain_step
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
    from haaw import Value

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
    from haaw import Value
    from haaw.course.exercises.nb01 import mul_local, pow_local
    from haaw.engine import plugins

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
