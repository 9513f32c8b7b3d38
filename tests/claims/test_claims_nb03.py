"""The claims of notebook 03: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.course import datasets
from haaw.course.exercises import check, REGISTRY
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.nb03 import G, linear_backward, W, X
from haaw.engine import plugins
from haaw.nn import MLP
from haaw.optim import SGD
from haaw.tools import gradcheck
from haaw.tools.flops import count_flops


def test_03_the_transpose_formulas_agree_with_finite_differences_and_torch():
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


def test_03_the_bias_gradient_is_the_column_sum_of_G_on_the_exercise_data():
    bias = Tensor(np.zeros(2), requires_grad=True)
    (Tensor(X, requires_grad=True) @ Tensor(W, requires_grad=True) + bias).backward(G)
    np.testing.assert_array_equal(bias.grad, [1.0, 4.0])  # the notebook prints dL/db = [1. 4.]
    np.testing.assert_array_equal(bias.grad, np.sum(G, axis=0))


def test_03_the_jacobian_is_mostly_zeros_and_its_transpose_times_G_is_XtG():
    B, n = X.shape
    m = W.shape[1]
    # dY[b, j]/dW[i, k] = X[b, i] if j == k else 0, written out entry by entry
    J = np.array([[X[b, i] * (j == k) for i in range(n) for k in range(m)] for b in range(B) for j in range(m)])
    assert J.shape == (8, 6)
    structural = np.array([[j != k for i in range(n) for k in range(m)] for b in range(B) for j in range(m)])
    assert structural.mean() == 0.5 and np.all(J[structural] == 0)  # at least half, whatever X holds
    assert f"{np.mean(J == 0):.0%}" == "62%"
    np.testing.assert_allclose((J.T @ G.ravel()).reshape(n, m), X.T @ G)
    assert 4096 * 4096 * 4096 * 4 == 274_877_906_944 and round(274_877_906_944 / 1e9) == 275
    assert round(4096 * 4096 * 4 / 1e6) == 67  # W itself, in the same decimal units: 67 MB against 275 GB


def test_03_backward_costs_2x_the_forward_and_1x_for_the_first_layer():
    for needs_grad, ratio in ((True, 2), (False, 1)):
        x = Tensor(np.ones((8, 5)), requires_grad=needs_grad)
        w = Tensor(np.ones((5, 3)), requires_grad=True)
        with count_flops() as counter:
            (x @ w).backward(np.ones((8, 3)))
        assert counter.backward["matmul"] == ratio * counter.forward["matmul"] == ratio * 2 * 8 * 5 * 3
        b = Tensor(np.ones(3), requires_grad=True)
        x.grad = w.grad = None
        with count_flops() as counter:
            F.linear(x, w, b).backward(np.ones((8, 3)))
        # dW (and dX when the input needs it) are matmuls of the forward's size; db sums 8 rows of 3
        assert counter.forward["linear"] == 2 * 8 * 5 * 3
        assert counter.backward["linear"] == ratio * 2 * 8 * 5 * 3 + 8 * 3


def test_03_the_mlp_flop_table_and_the_ratio_climbing_toward_2():
    rng = np.random.default_rng(0)
    net = MLP([784, 256, 10], seed=0, dtype=np.float32)
    with count_flops() as flops:
        F.cross_entropy(net(Tensor(rng.standard_normal((256, 784)).astype(np.float32))),
                        rng.integers(0, 10, 256)).backward()
    layer_1, layer_2 = 2 * 256 * 784 * 256, 2 * 256 * 256 * 10
    assert flops.forward["linear"] == layer_1 + layer_2 == 104_071_168
    assert flops.backward["linear"] == layer_1 + 2 * layer_2 + 256 * (256 + 10) == 105_449_984
    ratios = []
    for hidden in (1, 4, 16):
        net = MLP([128] + [128] * hidden + [10], seed=0, dtype=np.float32)
        with count_flops() as flops:
            F.cross_entropy(net(Tensor(np.ones((8, 128), dtype=np.float32))), np.zeros(8, dtype=int)).backward()
        ratios.append(sum(flops.backward.values()) / sum(flops.forward.values()))
    assert [f"{r:.2f}" for r in ratios] == ["1.08", "1.76", "1.94"]
    assert ratios[0] < ratios[1] < ratios[2] < 2


def test_03_the_softmax_cross_entropy_gradient_is_P_minus_Y_over_B():
    rng = np.random.default_rng(4)
    z0 = rng.standard_normal((5, 3))
    targets = np.array([0, 2, 1, 2, 0])
    z = Tensor(z0, requires_grad=True)
    F.cross_entropy(z, targets).backward()
    P = np.exp(z0) / np.exp(z0).sum(axis=1, keepdims=True)
    expected = (P - np.eye(3)[targets]) / 5
    np.testing.assert_allclose(z.grad, expected, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(z.grad.sum(axis=1), 0.0, atol=1e-15)

    def loss(logits):  # written again from the definition: −mean log softmax[target]
        shifted = logits - logits.max(axis=1, keepdims=True)
        return -np.mean(shifted[np.arange(5), targets] - np.log(np.exp(shifted).sum(axis=1)))

    h = 1e-6
    for b, k in ((1, 2), (0, 0), (4, 1)):
        up, down = z0.copy(), z0.copy()
        up[b, k] += h
        down[b, k] -= h
        assert (loss(up) - loss(down)) / (2 * h) == pytest.approx(expected[b, k], abs=1e-9)
    torch = pytest.importorskip("torch")
    zt = torch.tensor(z0, requires_grad=True)
    torch.nn.functional.cross_entropy(zt, torch.tensor(targets)).backward()
    np.testing.assert_allclose(zt.grad.numpy(), expected, rtol=1e-12, atol=1e-15)


def test_03_the_two_moons_mlp_trains_to_the_same_losses_on_the_learner_s_linear_backward():
    points, labels = datasets.two_moons(200, noise=0.15, seed=1)
    calls = []

    def counted(X, W, G):
        calls.append(1)
        return linear_backward(X, W, G)

    def train(steps=600):
        model = MLP([2, 16, 16, 2], activation="tanh", seed=3)
        optimizer = SGD(model.parameters(), lr=0.5)
        run = [F.cross_entropy(model(Tensor(points)), labels).item()]  # run[k]: the loss after k steps
        for _ in range(steps):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(Tensor(points)), labels)
            loss.backward()
            optimizer.step()
            run.append(F.cross_entropy(model(Tensor(points)), labels).item())
        return np.array(run)

    def counted_loss(logits, targets):
        calls.append("loss")
        return REGISTRY["03-cross-entropy"].reference(logits, targets)

    engine = train()
    with plugins.use(linear=counted, cross_entropy=counted_loss):
        yours = train()
    assert calls.count("loss") == 600  # every backward started at the learner's cross-entropy
    calls[:] = [c for c in calls if c != "loss"]
    assert len(engine) == 601  # "after 600 steps": 600 updates, the loss measured after each and at the start
    assert len(calls) == 3 * 600  # three layers, every step: all their gradients came from linear_backward
    np.testing.assert_allclose(yours, engine, rtol=0, atol=1e-12)
    assert f"{engine[0]:.3f}" == "0.671" and f"{engine[-1]:.3f}" == "0.010"


def test_03_a_tensor_without_requires_grad_gets_no_grad_and_its_gradient_is_not_computed():
    data = Tensor(np.ones((4, 3)))
    assert data.requires_grad is False  # the default
    w = Tensor(np.ones((3, 2)), requires_grad=True)
    with count_flops() as counter:
        (data @ w).backward(np.ones((4, 2)))
    assert data.grad is None and w.grad.shape == (3, 2)
    assert counter.backward["matmul"] == counter.forward["matmul"]  # dW only: dX skipped


def test_03_the_linear_backward_hint_s_reshape_works_inside_the_function_and_a_global_n_does_not():
    def as_the_hint_says(X, W, G):
        rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
        return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)

    assert check("03-linear-backward", as_the_hint_says).status == CORRECT
    n, m = 3, 2  # the notebook's globals: a literal copy of X.reshape(-1, n) fits only inputs of width 3

    def with_the_global_n(X, W, G):
        rows_X, rows_G = X.reshape(-1, n), G.reshape(-1, m)
        return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)

    assert check("03-linear-backward", with_the_global_n).status == WRONG

    ex = REGISTRY["03-linear-backward"]
    said = " ".join([*ex.hints, *(m.why for m in ex.mistakes), *(c.note for c in ex.cases())])
    assert "reshape(-1, n)" not in said and "X.reshape(-1, X.shape[-1])" in said


def test_03_the_dX_checker_names_a_division_by_the_batch_size():
    assert "divided by the batch size" in check("03-dX", G @ W.T / 4).message
    assert "divided by the batch size" not in check("03-dX", G @ W.T).message


def test_03_shape_valid_products_of_the_same_matrices_are_not_the_gradients():
    """"A shape is a memory aid, not a proof": the three impostors have the gradients' shapes and other values."""
    rng = np.random.default_rng(0)
    X_, W_, G_ = rng.standard_normal((4, 3)), rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    M = np.random.default_rng(1).standard_normal((2, 2))
    dW, dX = X_.T @ G_, G_ @ W_.T  # from one entry of the sum, checked against finite differences in the first test
    for product, gradient in ((X_.T @ G_ @ M, dW), (X_.T @ X_ @ X_.T @ G_, dW), (G_ @ W_.T @ W_ @ W_.T, dX)):
        assert product.shape == gradient.shape and not np.allclose(product, gradient)


def test_03_exp_overflows_past_709_8_and_the_stable_loss_of_the_two_rows_is_1_3133_and_800():
    largest = np.finfo(np.float64).max
    assert f"{largest:.1e}" == "1.8e+308" and f"{np.log(largest):.1f}" == "709.8"
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        assert np.isinf(np.exp(1000.0)) and np.exp(-800.0) == 0.0
        naive = np.exp([1000.0, 999.0, 0.0]) / np.exp([1000.0, 999.0, 0.0]).sum()
        assert np.isnan(naive[1])
    # row (1000, 999, 0), target 1: −log P = log(1 + e^−1 + e^−1000) + 1, written out by hand
    assert 1 + np.log1p(np.exp(-1.0)) == pytest.approx(1.3133, abs=5e-5)
    # row (0, 800, 0), target 0: log(e^0 + e^800 + e^0) − 0 = 800 + log(1 + 2e^−800) = 800 to double precision
    losses = F.cross_entropy(Tensor(np.array([[1000.0, 999.0, 0.0], [0.0, 800.0, 0.0]])), np.array([1, 0]),
                             reduction="none").data
    np.testing.assert_allclose(losses, [1 + np.log1p(np.exp(-1.0)), 800.0], rtol=1e-12)


def test_03_central_differences_in_float32_go_wrong_where_float64_s_are_best():
    """The table: the float64 error falls like h² to about 1e-10 near h = 1e-5; float32's is about 1e-2 at h = 1e-6."""
    def cd(x, h):
        return (x * x * x - (x - h) * (x - h) * (x - h) + (x + h) * (x + h) * (x + h) - x * x * x) / (2 * h)

    exact = 3 * 0.7 ** 2
    err64 = {h: abs(cd(0.7, h) - exact) / exact for h in (1e-2, 1e-3, 1e-5, 1e-7)}
    assert err64[1e-2] == pytest.approx(1e-4 / 1.47, rel=0.1)  # h²/1.47: the central difference's own error
    assert err64[1e-3] < 1e-6 and err64[1e-5] < 1e-9 and err64[1e-7] > err64[1e-5]
    x32, h32 = np.float32(0.7), np.float32(1e-6)
    with np.errstate(all="ignore"):
        d32 = (x32 + h32) ** np.float32(3) - (x32 - h32) ** np.float32(3)
    exact32 = 3 * float(x32) ** 2
    assert 1e-3 < abs(float(d32 / (2 * h32)) - exact32) / exact32 < 1e-1


def test_03_a_central_difference_across_relu_s_corner_averages_the_two_slopes():
    h = 1e-6
    relu = lambda v: max(v, 0.0)  # noqa: E731
    assert (relu(0.0 + h) - relu(0.0 - h)) / (2 * h) == pytest.approx(0.5)
    assert (relu(1e-7 + h) - relu(1e-7 - h)) / (2 * h) == pytest.approx(0.55)
    x = Tensor(np.array([0.0, 1e-7]), requires_grad=True)
    x.relu().sum().backward()
    assert x.grad.tolist() == [0.0, 1.0]  # the engine's convention at 0, and the true slope just right of it
    report = gradcheck(lambda v: v.relu().sum(), np.array([-0.5, 0.0, 1e-7, 0.8]), names=["x"])
    assert not report.ok
