"""The claims of notebook 03: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest

from haaw.tools import gradcheck


def test_03_the_transpose_formulas_agree_with_finite_differences_and_torch():
    from haaw import Tensor

    rng = np.random.default_rng(0)
    X0, W0, G = rng.standard_normal((5, 3)), rng.standard_normal((3, 4)), rng.standard_normal((5, 4))
    X, W = Tensor(X0, requires_grad=True), Tensor(W0, requires_grad=True)
    (X @ W).backward(G)
    np.testing.assert_allclose(W.grad, X0.T @ G, rtol=1e-12)
    np.testing.assert_allclose(X.grad, G @ W0.T, rtol=1e-12)
    assert gradcheck(lambda x, w: x @ w, X0, W0).ok
    torch = pytest.importorskip("torch")
    Xt, Wt = torch.tensor(X0, requires_grad=True), torch.tensor(W0, requires_grad=True)
    (Xt @ Wt).backward(torch.tensor(G))
    np.testing.assert_allclose(W.grad, Wt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(X.grad, Xt.grad.numpy(), rtol=1e-12)


def test_03_backward_costs_2x_the_forward_and_1x_for_the_first_layer():
    from haaw import Tensor
    from haaw.tools.flops import count_flops

    for needs_grad, ratio in ((True, 2), (False, 1)):
        x = Tensor(np.ones((8, 5)), requires_grad=needs_grad)
        w = Tensor(np.ones((5, 3)), requires_grad=True)
        with count_flops() as counter:
            (x @ w).backward(np.ones((8, 3)))
        assert counter.backward["matmul"] == ratio * counter.forward["matmul"] == ratio * 2 * 8 * 5 * 3
