import pytest

from haaw import Value
from haaw.engine.forward_mode import Dual, forward_mode_gradient


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
