"""The claims of notebook 04: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest


def test_04_the_residual_branch_passes_the_gradient_with_factor_1():
    from haaw.course.nb04 import residual_factor

    fractions = residual_factor(branch_scale=1e-6)
    assert fractions["residual y = x + F(x)"] == pytest.approx(1.0, abs=1e-5)
    assert fractions["plain y = F(x)"] < 1e-4


def test_04_without_residuals_the_gradient_vanishes_or_explodes_with_depth():
    from haaw.course.nb04 import deep_stack_grad_norms

    ratio = lambda norms: norms[0] / norms[-1]
    assert ratio(deep_stack_grad_norms(50, init_scale=0.9)) < 1e-2  # vanishes
    assert ratio(deep_stack_grad_norms(50, init_scale=1.1)) > 10  # explodes
    for scale in (0.9, 1.1):
        residual = ratio(deep_stack_grad_norms(50, init_scale=scale, residual=True))
        normalised = ratio(deep_stack_grad_norms(50, init_scale=scale, residual=True, normalise=True))
        assert 0.1 < residual < 10 and 0.5 < normalised < 2
        assert abs(np.log(normalised)) < abs(np.log(residual))
    assert 0.9**50 == pytest.approx(0.00515, rel=1e-3) and 1.1**50 == pytest.approx(117.39, rel=1e-3)


def test_04_a_dead_relu_unit_passes_no_gradient_to_its_weights():
    import haaw.nn.functional as F
    from haaw import Tensor
    from haaw.course.datasets import two_moons
    from haaw.nn import MLP

    points, labels = two_moons(64, seed=2)
    model = MLP([2, 16, 16, 2], seed=5)
    first, second, last = model.layers
    second.bias.data[:4] = -100.0  # four units that cannot fire
    pre = second(first(Tensor(points)).relu())
    F.cross_entropy(last(pre.relu()), labels).backward()
    dead = np.all(pre.data <= 0, axis=0)
    assert dead[:4].all()
    np.testing.assert_array_equal(np.all(second.weight.grad == 0, axis=0), dead)
    np.testing.assert_array_equal(second.bias.grad[dead], 0.0)
    assert np.all(np.any(second.weight.grad[:, ~dead] != 0, axis=0))
