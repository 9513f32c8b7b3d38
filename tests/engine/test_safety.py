"""The safety nets of notebook 08: in-place edits, no_grad/detach, anomalies, custom operations. (A frozen layer:
tests/nn/test_freeze.py.)"""
import numpy as np
import pytest

from haaw import Tensor, detect_anomaly, no_grad
from haaw.engine import Function
from haaw.optim import SGD
from haaw.tools import gradcheck

rng = np.random.default_rng(0)


def test_an_in_place_change_of_a_saved_value_is_caught_at_backward_and_names_the_operation():
    x = Tensor(np.ones(3))
    w = Tensor(np.full(3, 2.0), requires_grad=True)
    y = (x * w).sum()
    x += 1.0
    with pytest.raises(RuntimeError, match=r"backward of 'mul' needs input 0 \(shape \(3,\)\).*modified in place"):
        y.backward()


def test_a_saved_output_changed_in_place_is_caught_too():
    w = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    h = w.exp()  # exp saves its output for backward
    with no_grad():
        h *= 2.0  # allowed here, but versioned
    with pytest.raises(RuntimeError, match="backward of 'exp' needs its output"):
        h.sum().backward()


def test_in_place_on_a_tensor_that_requires_grad_is_refused_outside_no_grad():
    w = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"x \+= \.\.\.: in-place change of a tensor that requires a gradient"):
        w += 1.0
    with no_grad():
        w -= 0.5
    assert list(w.data) == [0.5, 0.5] and w._version == 1


@pytest.mark.parametrize("write", ["setitem", "+=", "-=", "*=", "/="])
def test_writing_a_tensor_that_requires_grad_into_one_that_does_not_is_refused_not_lost(write):
    # PyTorch records the write; haaw records no in-place operation, so its gradient would vanish: w.grad None
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    buf = Tensor(np.ones(2))
    with pytest.raises(RuntimeError, match="the value written requires a gradient.*would be lost"):
        if write == "setitem":
            buf[0:2] = w
        elif write == "+=":
            buf += w
        elif write == "-=":
            buf -= w
        elif write == "*=":
            buf *= w
        else:
            buf /= w
    assert list(buf.data) == [1.0, 1.0]  # nothing was written
    buf[0:2] = w.detach()  # no gradient wanted: allowed
    with no_grad():
        buf += w  # an update: allowed
    assert list(buf.data) == [2.0, 4.0]


def test_an_optimizer_step_between_forward_and_backward_is_caught():
    weights = [Tensor(w, requires_grad=True) for w in (np.ones((3, 4)) / 3, np.ones((4, 2)) / 4)]  # a two-layer net
    loss = ((Tensor(rng.standard_normal((5, 3))) @ weights[0]).tanh() @ weights[1]).sum()
    for p in weights:
        p.grad = np.ones_like(p.data)
    SGD(weights, lr=0.1).step()  # changes W in place while the graph still needs it
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_detach_stops_the_gradient_and_no_grad_records_nothing():
    w = Tensor(np.ones(2), requires_grad=True)
    (w.detach() * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [1.0, 1.0])  # only the non-detached use contributes
    with no_grad():
        assert not (w * 2.0).requires_grad


def test_anomaly_mode_names_the_first_operation_that_made_nan_or_inf():
    x = Tensor(np.array([1.0, -1.0]), requires_grad=True)
    with detect_anomaly():
        with pytest.raises(FloatingPointError, match="forward of 'log'"):
            with np.errstate(invalid="ignore"):
                x.log()
        z = Tensor(np.zeros(2), requires_grad=True)
        y = (z**0.5).sum()
        with pytest.raises(FloatingPointError, match="backward of 'pow'"):
            with np.errstate(divide="ignore", invalid="ignore"):
                y.backward()
    with np.errstate(invalid="ignore"):
        assert np.isnan(x.log().data[1])  # outside anomaly mode: plain NumPy behaviour


class Square(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return 2 * a * g


class WrongSquare(Square):
    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return a * g  # the 2 is missing


class Pair(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return a * b

    @staticmethod
    def backward(ctx, g):
        return g * ctx.b  # only one gradient for two inputs


def test_gradcheck_catches_a_custom_op_whose_backward_does_not_match():
    x = np.array([1.0, -2.0, 3.0])
    assert gradcheck(Square.apply, x).ok
    assert not gradcheck(WrongSquare.apply, x).ok
    with pytest.raises(ValueError, match=r"Pair.backward returned 1 gradient\(s\) for the 2 argument\(s\)"):
        Pair.apply(Tensor(x, requires_grad=True), Tensor(x, requires_grad=True)).sum().backward()


def test_a_custom_op_sees_pytorch_s_needs_input_grad_and_passes_non_tensor_arguments_through():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, a, factor, b):
            seen["forward"] = ctx.needs_input_grad
            ctx.factor = factor
            return a * factor + b

        @staticmethod
        def backward(ctx, g):
            seen["backward"] = ctx.needs_input_grad
            return g * ctx.factor, None, g

    a, b = Tensor(np.ones(2), requires_grad=True), Tensor(np.ones(2))
    Scale.apply(a, 3.0, b).sum().backward()
    assert seen == {"forward": (True, False, False), "backward": (True, False, False)}
    np.testing.assert_array_equal(a.grad, [3.0, 3.0])
    assert b.grad is None


def test_an_in_place_edit_of_what_a_custom_op_saved_is_caught():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = Square.apply(x)
    with no_grad():
        x += 1.0
    with pytest.raises(RuntimeError, match="backward of 'Square' needs input 0"):
        y.sum().backward()




def test_a_custom_op_whose_inputs_need_no_gradient_records_nothing():
    y = Square.apply(Tensor(np.array([1.0, -2.0])))
    np.testing.assert_array_equal(y.data, [1.0, 4.0])
    assert not y.requires_grad and y._parents == ()
