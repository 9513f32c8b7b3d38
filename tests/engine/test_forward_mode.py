import math

import pytest

from haaw import Value
from haaw.engine.forward_mode import Dual, forward_mode_gradient, gradient


def expression(a, b):
    return ((a * b).tanh() + 3 / b - 2 * a + (a - b) ** 2 + (-b).exp() * 0.1 + a.log()
            + (1 - a) * b.sigmoid() + (a * 2).relu() - b / a)


def test_forward_mode_agrees_with_reverse_mode_on_every_operation():
    grads, passes = forward_mode_gradient(expression, [0.8, -1.3])
    a, b = Value(0.8), Value(-1.3)
    expression(a, b).backward()
    assert passes == 2
    assert grads == pytest.approx([a.grad, b.grad], rel=1e-12)


def test_a_dual_carries_the_derivative_of_one_chosen_input():
    x = Dual(3.0, 1.0)
    y = x * x + 2 * x
    assert (y.data, y.tangent) == (15.0, 8.0)
    assert repr(y) == "Dual(data=15, tangent=8)"


@pytest.mark.parametrize("x", [-1000.0, -30.0, -1.0, 0.0, 0.5, 2.0, 30.0, 1000.0])
def test_the_three_engines_agree_on_every_function_s_value_and_slope(x):
    """Value (scalar, reverse), Dual (scalar, forward) and Tensor (arrays, reverse) each compute
    tanh, exp, log, sigmoid and relu, each written in its own file; their values and slopes must be
    the same numbers."""
    import numpy as np

    from haaw import Tensor

    for name in ("tanh", "sigmoid", "relu", "exp", "log"):
        if name == "exp" and x > 700 or name == "log" and x <= 0 or name == "relu" and x == 0:
            continue
        v = Value(x)
        out = getattr(v, name)()
        out.backward()
        d = getattr(Dual(x, 1.0), name)()
        t = Tensor(np.array([x]), requires_grad=True)
        o = getattr(t, name)()
        o.sum().backward()
        assert d.data == pytest.approx(out.data, rel=1e-12, abs=1e-300), name
        assert o.data[0] == pytest.approx(out.data, rel=1e-12, abs=1e-300), name
        # slopes near 0 are the difference of two numbers near 1 (σ(1 − σ) at x = 30): equal to 1e-15
        assert d.tangent == pytest.approx(v.grad, rel=1e-12, abs=1e-15), name
        assert t.grad[0] == pytest.approx(v.grad, rel=1e-12, abs=1e-15), name


def test_dual_sigmoid_does_not_overflow_for_very_negative_inputs():
    s = Dual(-1000.0, 1.0).sigmoid()
    assert s.data == 0.0 and s.tangent == 0.0


# --- forward over reverse: gradient() on Duals gives H·v --------------------------------------------


def second_order(a, b):  # every operation DualNode has, so each one's local derivative is differentiated again
    return ((a * b).tanh() + 3 / b - 2 * a + (a - b) ** 2 + (-b).exp() * 0.1 + a.log()
            + (1 - a) * b.sigmoid() + (a * 2).relu() - b / a + a ** 3 * b)


def hessian_by_hand(a, b):
    """second_order's Hessian, differentiated on paper (relu's part is linear: 0)."""
    t, s, e = math.tanh(a * b), 1 / (1 + math.exp(-b)), math.exp(-b)
    d2t = -2 * t * (1 - t * t)  # tanh'' in terms of t
    ds, d2s = s * (1 - s), s * (1 - s) * (1 - 2 * s)
    haa = b * b * d2t + 2 - 1 / a**2 - 2 * b / a**3 + 6 * a * b
    hab = (1 - t * t) + a * b * d2t - 2 - ds + 1 / a**2 + 3 * a * a
    hbb = a * a * d2t + 6 / b**3 + 2 + 0.1 * e + (1 - a) * d2s
    return [[haa, hab], [hab, hbb]]


@pytest.mark.parametrize("point", [(0.8, -1.3), (1.7, 0.4), (0.3, 2.5)])
@pytest.mark.parametrize("v", [(1.0, 0.0), (0.0, 1.0), (0.6, -2.0)])
def test_gradient_on_duals_gives_the_hessian_times_v_of_every_operation(point, v):
    grads = gradient(second_order)(*[Dual(x, t) for x, t in zip(point, v)])
    H = hessian_by_hand(*point)
    assert [g.tangent for g in grads] == pytest.approx([H[0][0] * v[0] + H[0][1] * v[1],
                                                        H[1][0] * v[0] + H[1][1] * v[1]], rel=1e-10)
    a, b = Value(point[0]), Value(point[1])
    second_order(a, b).backward()
    assert [g.data for g in grads] == pytest.approx([a.grad, b.grad], rel=1e-12)  # the values are the gradient


def test_gradient_on_plain_numbers_has_zero_tangents_and_reuse_accumulates():
    grads = gradient(lambda x: x * x * x + x)(2.0)  # x used three times in x·x·x, once more in + x
    assert (grads[0].data, grads[0].tangent) == (13.0, 0.0)
    (g,) = gradient(lambda x: x * x * x + x)(Dual(2.0, 1.0))
    assert g.tangent == 12.0  # d²/dx² (x³ + x) = 6x


def test_hessian_vector_product_agrees_with_pytorch_double_backward():
    torch = pytest.importorskip("torch")
    point, v = (0.8, -1.3), (0.6, -2.0)
    ours = [g.tangent for g in gradient(second_order)(*[Dual(x, t) for x, t in zip(point, v)])]
    a, b = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in point)
    loss = (torch.tanh(a * b) + 3 / b - 2 * a + (a - b) ** 2 + torch.exp(-b) * 0.1 + torch.log(a)
            + (1 - a) * torch.sigmoid(b) + torch.relu(a * 2) - b / a + a ** 3 * b)
    ga, gb = torch.autograd.grad(loss, (a, b), create_graph=True)
    theirs = torch.autograd.grad(ga * v[0] + gb * v[1], (a, b))
    assert ours == pytest.approx([t.item() for t in theirs], rel=1e-12)


# --- each DualNode operation's value, and the kinks (found by mutation testing) ---------------------------------


def test_gradient_sees_the_value_of_a_sum_and_a_quotient_when_a_function_of_it_follows():
    """A sum's or a quotient's value reaches the gradient only through what follows it: d/da tanh(a + b) is
    1 − tanh²(a + b), and d/da tanh(a / b) is (1 − tanh²(a / b)) / b. Hand values, no engine."""
    a, b = 0.7, -0.3
    ga, gb = gradient(lambda x, y: (x + y).tanh())(a, b)
    slope = 1 - math.tanh(a + b) ** 2
    assert (ga.data, gb.data) == pytest.approx((slope, slope), rel=1e-12)
    ga, gb = gradient(lambda x, y: (x / y).tanh())(a, b)
    slope = 1 - math.tanh(a / b) ** 2
    assert (ga.data, gb.data) == pytest.approx((slope / b, -slope * a / b**2), rel=1e-12)


def test_gradient_of_plain_numbers_goes_through_every_function():
    """Plain numbers are made Duals with a tangent of 0, so tanh, exp, log, sigmoid and relu all apply."""
    x = 0.5
    for f, slope in [(lambda t: t.tanh(), 1 - math.tanh(x) ** 2), (lambda t: t.exp(), math.exp(x)),
                     (lambda t: t.log(), 1 / x), (lambda t: t.sigmoid(), math.exp(-x) / (1 + math.exp(-x)) ** 2),
                     (lambda t: t.relu(), 1.0)]:
        (g,) = gradient(f)(x)
        assert (g.data, g.tangent) == pytest.approx((slope, 0.0), rel=1e-12)


@pytest.mark.parametrize("x, slope", [(-1.5, 0.0), (0.0, 0.0), (2.0, 1.0)])  # torch.relu's slope at 0 is 0 too
def test_relu_s_slope_is_one_only_where_its_input_is_positive(x, slope):
    (g,) = gradient(lambda t: t.relu() * 3)(Dual(x, 1.0))
    assert (g.data, g.tangent) == (3 * slope, 0.0)  # relu is linear on each side: no second derivative


@pytest.mark.parametrize("x", [0.0, 2.0])
def test_powers_zero_and_one_have_slopes_zero_and_one_even_at_zero(x):
    """d/dx x⁰ = 0 everywhere (at 0 too, as torch.pow's backward gives), d/dx x¹ = 1: the slope of 5x⁰ + 3x¹ is 3."""
    (g,) = gradient(lambda t: t**0 * 5 + t**1 * 3)(Dual(x, 1.0))
    assert (g.data, g.tangent) == (3.0, 0.0)


def test_the_node_methods_give_the_same_gradient_when_backward_watches_every_step():
    """With ``on_step`` (the step-through explorer's way in), ``autograd.backward`` walks DualNodes through their
    own ``_reset_grad``, ``_vjp`` and ``_add_grad`` instead of its fast loop: the Hessian-vector product must not
    change (hand values, as above)."""
    from haaw.engine import autograd
    from haaw.engine.forward_mode import DualNode

    point, v = (0.8, -1.3), (0.6, -2.0)
    leaves = [DualNode(Dual(x, t)) for x, t in zip(point, v)]
    steps = []
    autograd.backward(second_order(*leaves), Dual(1.0), on_step=lambda node, up, contributions: steps.append(node))
    H = hessian_by_hand(*point)
    assert [leaf.grad.tangent for leaf in leaves] == pytest.approx([H[0][0] * v[0] + H[0][1] * v[1],
                                                                    H[1][0] * v[0] + H[1][1] * v[1]], rel=1e-10)
    assert len(steps) > 10
