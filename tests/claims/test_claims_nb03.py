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
    for hidden in (1, 4, 16):  # the core's cell: backward from a random G at the outputs, no loss
        net = MLP([128] + [128] * hidden + [10], seed=0, dtype=np.float32)
        with count_flops() as flops:
            net(Tensor(np.ones((8, 128), dtype=np.float32))).backward(rng.standard_normal((8, 10)).astype(np.float32))
        ratios.append(flops.total_backward / flops.total_forward)
    assert [f"{r:.2f}" for r in ratios] == ["1.08", "1.76", "1.94"]
    assert ratios[0] < ratios[1] < ratios[2] < 2
    # the first layer pays once and every later one twice: the ratio is that mix, and climbs toward 2 with depth
    for hidden, ratio in zip((1, 4, 16), ratios):
        first, middle, last = 2 * 8 * 128 * 128, 2 * 8 * 128 * 128, 2 * 8 * 128 * 10
        forward = first + (hidden - 1) * middle + last + 8 * 128 * hidden          # + the ReLUs
        backward = first + 2 * ((hidden - 1) * middle + last) + 8 * (128 * hidden + 10) + 8 * 128 * hidden
        assert ratio == pytest.approx(backward / forward, rel=1e-12)


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

    engine = train()
    with plugins.use(linear=counted):
        yours = train()
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


def test_03_shapes_do_not_prove_the_formulas_three_shape_valid_products_are_wrong():
    rng = np.random.default_rng(0)
    X0, W0, G0 = (rng.standard_normal(s) for s in ((4, 3), (3, 2), (4, 2)))
    dW, dX = X0.T @ G0, G0 @ W0.T  # the gradients, checked against the engine in the first claim above
    for product, right in ((X0.T @ G0 @ W0.T @ W0, dW), (X0.T @ X0 @ X0.T @ G0, dW), (G0 @ W0.T @ W0 @ W0.T, dX)):
        assert product.shape == right.shape and not np.allclose(product, right)
    assert (G @ W.T @ W @ W.T).shape == (G @ W.T).shape  # the checker's own named mistake for 03-dX has the right shape


def _cross_entropy_by_definition(z, t):
    """Written again from the definition with plain NumPy: −mean log softmax[target], the log-sum-exp by logaddexp."""
    lse = np.logaddexp.reduce(z, axis=1)
    return float(np.mean(lse - z[np.arange(len(t)), t]))


def test_03_the_learner_s_cross_entropy_reference_agrees_with_finite_differences_and_torch():
    from haaw.course.exercises.nb03 import cross_entropy_forward_backward as ce

    rng = np.random.default_rng(7)
    for z0 in (rng.standard_normal((5, 4)) * 3, np.array([[1000.0, 999.0, 0.0], [0.0, 800.0, 0.0]])):
        t = rng.integers(0, z0.shape[1], len(z0))
        loss, grad = ce(z0, t)
        assert loss == pytest.approx(_cross_entropy_by_definition(z0, t), rel=1e-12)
        h = 1e-6
        for b, k in np.ndindex(z0.shape):
            up, down = z0.copy(), z0.copy()
            up[b, k] += h
            down[b, k] -= h
            numeric = (_cross_entropy_by_definition(up, t) - _cross_entropy_by_definition(down, t)) / (2 * h)
            assert numeric == pytest.approx(grad[b, k], abs=1e-6)
        torch = pytest.importorskip("torch")
        zt = torch.tensor(z0, requires_grad=True)
        tl = torch.nn.functional.cross_entropy(zt, torch.tensor(t))
        tl.backward()
        assert tl.item() == pytest.approx(float(loss), rel=1e-12)
        np.testing.assert_allclose(grad, zt.grad.numpy(), rtol=1e-10, atol=1e-15)


@pytest.mark.upstream
def test_03_the_naive_forward_overflows_and_the_log_of_P_underflows():
    big, t = np.array([[1000.0, 999.0, 0.0], [0.0, 800.0, 0.0]]), np.array([1, 0])
    with np.errstate(all="ignore"):
        assert np.exp(1000.0) == np.inf and np.exp(-800.0) == 0.0
        naive = -np.log((np.exp(big) / np.exp(big).sum(axis=1, keepdims=True))[[0, 1], t])
    assert np.isnan(naive[0]) and naive[1] == np.inf
    assert f"{np.log(np.finfo(np.float64).max):.1f}" == "709.8" and f"{np.finfo(np.float64).max:.1e}" == "1.8e+308"


def test_03_the_engine_s_log_sum_exp_cross_entropy_stays_finite_where_the_naive_forward_does_not():
    big, t = np.array([[1000.0, 999.0, 0.0], [0.0, 800.0, 0.0]]), np.array([1, 0])
    stable = F.cross_entropy(Tensor(big), t, reduction="none").data
    assert [f"{v:.4f}" for v in stable] == ["1.3133", "800.0000"]
    np.testing.assert_allclose(stable, [np.logaddexp.reduce([1.0, 0.0, -999.0]), 800.0], rtol=1e-12)


def test_03_the_mlp_trains_to_the_same_losses_on_the_learner_s_cross_entropy_in_the_engine():
    from haaw.course.exercises.nb03 import cross_entropy_forward_backward

    points, labels = datasets.two_moons(200, noise=0.15, seed=1)
    calls = []

    def counted(logits, targets):
        calls.append(1)
        return cross_entropy_forward_backward(logits, targets)

    def train(steps=600):
        model = MLP([2, 16, 16, 2], activation="tanh", seed=3)
        optimizer = SGD(model.parameters(), lr=0.5)
        run = []
        for step in range(steps + 1):
            loss = F.cross_entropy(model(Tensor(points)), labels)
            run.append(loss.item())
            if step == steps:
                break
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return np.array(run)

    engine = train()
    with plugins.use(cross_entropy=counted, linear=linear_backward):
        yours = train()
    assert len(calls) == 600
    np.testing.assert_allclose(yours, engine, rtol=0, atol=1e-12)


def test_03_the_cross_entropy_slot_serves_sum_ignore_index_and_float32():
    from haaw.course.exercises.nb03 import cross_entropy_forward_backward

    rng = np.random.default_rng(2)
    z0, t = rng.standard_normal((6, 4)), np.array([0, 3, 1, -100, 2, 2])
    for kwargs, dtype in (({"reduction": "sum"}, np.float64), ({"ignore_index": -100}, np.float64), ({}, np.float32)):
        tt = np.where(t < 0, 0, t) if not kwargs.get("ignore_index") else t
        ours, theirs = Tensor(z0.astype(dtype), requires_grad=True), Tensor(z0.astype(dtype), requires_grad=True)
        F.cross_entropy(ours, tt, **kwargs).backward()
        with plugins.use(cross_entropy=cross_entropy_forward_backward):
            F.cross_entropy(theirs, tt, **kwargs).backward()
        assert theirs.grad.dtype == dtype
        np.testing.assert_allclose(theirs.grad, ours.grad, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7)


def test_03_the_timing_cell_prints_the_counted_ratios_not_literals(stored_output):
    ratios = []
    for needs in (True, False):
        x = Tensor(np.ones((256, 512), dtype=np.float32), requires_grad=needs)
        w, b = Tensor(np.ones((512, 512), dtype=np.float32), requires_grad=True), Tensor(np.zeros(512, np.float32), requires_grad=True)
        with count_flops() as counted:
            F.linear(x, w, b).backward(np.ones((256, 512), dtype=np.float32))
        ratios.append(counted.total_backward / counted.total_forward)
    assert ratios == [2 + 1 / 1024, 1 + 1 / 1024]  # the bias gradient's B·m over the forward's 2·B·n·m
    printed = stored_output("03", "def time_linear(")
    assert "counted backward/forward = 2.001" in printed and "counted backward/forward = 1.001" in printed


@pytest.mark.upstream
def test_03_float32_finite_differences_are_garbage_at_small_h_and_float64_ones_are_not():
    def rel(a, n):
        return abs(a - n) / max(abs(a), abs(n))

    x32 = np.float32(0.7)
    exact32 = 3 * float(x32) ** 2
    plus, minus = x32 + np.float32(1e-6), x32 - np.float32(1e-6)
    in32 = float((plus * plus * plus - minus * minus * minus) / (np.float32(2) * np.float32(1e-6)))
    assert rel(exact32, in32) > 1e-3  # "off by about 1e-02": the rules of thumb would call it a bug
    in64 = ((0.7 + 1e-6) ** 3 - (0.7 - 1e-6) ** 3) / 2e-6
    assert rel(3 * 0.49, in64) < 1e-9
    assert rel(3 * 0.7, in64) == pytest.approx(0.3, abs=0.001)  # the buggy 3x, relative error 0.3
    assert abs(1e-6 * 3 * 0.7 - 1e-6 * in64) == pytest.approx(6.3e-7, rel=0.01)  # "off by only 6e-07"


def test_03_relu_at_its_kink_fails_the_gradient_check_though_its_backward_is_right():
    x = np.array([-0.5, 0.0, 1e-7, 0.8])
    report = gradcheck(lambda t: t.relu().sum(), x)
    assert not report.ok
    np.testing.assert_allclose(report.rows[0].numeric, [0.0, 0.5, 0.55, 1.0], atol=1e-9)
    np.testing.assert_array_equal(report.rows[0].analytic, [0.0, 0.0, 1.0, 1.0])


@pytest.mark.upstream
def test_03_torch_s_relu_also_takes_slope_0_at_its_kink_and_its_gradcheck_warns_below_double_precision():
    x = np.array([-0.5, 0.0, 1e-7, 0.8])
    torch = pytest.importorskip("torch")
    xt = torch.tensor(x, requires_grad=True)
    xt.relu().sum().backward()
    np.testing.assert_array_equal(xt.grad.numpy(), [0.0, 0.0, 1.0, 1.0])  # the same convention at exactly 0
    with pytest.warns(UserWarning, match="double precision"):
        torch.autograd.gradcheck(lambda t: t.relu(), (torch.tensor([0.3, -0.4], requires_grad=True),), raise_exception=False)


def test_03_gradcheck_passes_a_wrong_derivative_of_a_tiny_function_and_refuses_it_at_ordinary_size():
    from haaw import Function

    def cube_with_3x_for_3x2(scale):
        class WrongCube(Function):
            @staticmethod
            def forward(ctx, a):
                ctx.a = a
                return scale * a**3

            @staticmethod
            def backward(ctx, g):
                return g * scale * 3 * ctx.a  # the bug: 3x where 3x² is right

        return lambda t: WrongCube.apply(t).sum()

    x = np.array([0.7])
    assert not gradcheck(cube_with_3x_for_3x2(1.0), x).ok
    assert not gradcheck(cube_with_3x_for_3x2(1e-6), x).ok
    tiny = gradcheck(cube_with_3x_for_3x2(1e-9), x)
    assert tiny.ok                      # the fixed 1e-8 of the test lets it through
    assert 3 * 0.7 * 1e-9 < 1e-8 and abs(3 * 0.7 - 3 * 0.49) / (3 * 0.7) > 0.29   # wholly wrong, yet under the 1e-8


@pytest.mark.upstream
def test_03_exp_overflows_near_88_7_in_float32_and_near_11_in_float16():
    with np.errstate(over="ignore"):
        assert np.isfinite(np.exp(np.float32(88.7))) and np.isinf(np.exp(np.float32(88.8)))
        assert np.isfinite(np.exp(np.float16(11.0))) and np.isinf(np.exp(np.float16(11.1)))
        assert np.isfinite(np.exp(709.78)) and np.isinf(np.exp(709.79))


def test_03_near_a_flat_point_a_right_backward_shows_a_large_relative_error():
    """Only the gradient is tiny, not the function: the finite difference's rounding, about 1e-16·|f|/h, swamps it."""
    report = gradcheck(lambda t: ((t * t + 1.0) * 3.0).sum(), np.array([1e-10]))
    assert report.worst > 0.1                      # the backward, 6x = 6e-10, is exact; the difference is not
    assert gradcheck(lambda t: ((t * t + 1.0) * 3.0).sum(), np.array([0.7])).ok


def test_03_the_array_engine_s_max_splits_a_tie_equally():
    from haaw import Tensor

    t = Tensor(np.array([1.0, 1.0, 0.0]), requires_grad=True)
    t.max().backward()
    assert t.grad.tolist() == [0.5, 0.5, 0.0]


def test_03_training_keeps_weights_in_float32_while_the_matrix_products_run_in_16_bits():
    """The log-sum-exp section: float32 is the format of the weights and the optimizer's update, and the matrix
    products run in a 16-bit format (notebook 07's master weights), where exp overflows near 11."""
    from haaw.amp import MasterWeights, StaticLossScaler

    rng = np.random.default_rng(0)
    w = Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    masters = MasterWeights([w], low="float16")           # the model's copy in float16, the master in float32
    x = Tensor(rng.standard_normal((8, 4)).astype(np.float16))
    y = x @ w
    assert w.data.dtype == np.float16 and y.data.dtype == np.float16  # the product ran in 16 bits
    scaler = StaticLossScaler(scale=1.0)
    scaler.scale_loss(y.sum()).backward()
    assert masters.step(scaler, lr=1e-3)
    assert masters.master[0].dtype == np.float32 and w.data.dtype == np.float16
    # why the master is float32: an update of 1e-4 to a weight of 1 is rounded away in float16, kept in float32
    assert np.float16(1.0) + np.float16(1e-4) == np.float16(1.0)
    assert np.float32(1.0) + np.float32(1e-4) != np.float32(1.0)


# --- the companion's own gradient checker -----------------------------------------------------------------


def _layer():
    from haaw.course.exercises.nb03 import grad_check
    rng = np.random.default_rng(7)
    X_, C_ = rng.standard_normal((6, 3)), rng.standard_normal((6, 4))
    W_ = rng.standard_normal((3, 4)) * 0.5

    def loss(W):
        return float(np.sum(np.tanh(X_ @ W) * C_))

    def backward(W, slope=lambda y: 1 - y * y):
        return X_.T @ (C_ * slope(np.tanh(X_ @ W)))
    every = [np.unravel_index(k, W_.shape) for k in range(W_.size)]
    return grad_check, loss, backward, W_, every, rng


def test_03_the_checker_passes_the_right_layer_backward_and_catches_the_planted_slope_everywhere():
    grad_check, loss, backward, W_, every, _ = _layer()
    assert grad_check(loss, W_, backward(W_), every, 1e-6).max() < 1e-7
    assert grad_check(loss, W_, backward(W_, slope=lambda y: 1 - y), every, 1e-6).min() > 1e-2  # every entry


def test_03_the_step_size_trade_off_as_the_table_reads_it():
    grad_check, loss, backward, W_, every, _ = _layer()
    worst = {h: grad_check(loss, W_, backward(W_), every, h).max() for h in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6,
                                                                             1e-9, 1e-12)}
    for h in (1e-1, 1e-2, 1e-3):  # the chord's error: a hundred times smaller for each tenfold smaller step
        assert worst[h / 10] == pytest.approx(worst[h] / 100, rel=0.05)
    assert worst[1e-1] > 1e-4 and 1e-7 < worst[1e-2] < 1e-4 and 1e-7 < worst[1e-3] < 1e-4
    assert all(worst[h] < 1e-7 for h in (1e-4, 1e-5, 1e-6))  # reads right
    assert 1e-7 < worst[1e-9] < 1e-4 and worst[1e-12] > 1e-4  # rounding takes over; a right backward reads as a bug


def test_03_numpy_assignment_keeps_one_of_two_writes_and_add_at_sums_them():
    rows = np.zeros(3)
    rows[np.array([1, 1])] = np.array([2.0, 5.0])
    assert rows[1] in (2.0, 5.0)
    np.add.at(rows, np.array([2, 2]), np.array([2.0, 5.0]))
    assert rows[2] == 7.0


def test_03_the_embedding_bug_sits_in_one_row_and_five_random_entries_catch_it_about_once_in_four(stored_output):
    import math
    from haaw.course.exercises.nb03 import grad_check
    rng = np.random.default_rng(0)
    E, C = rng.standard_normal((20, 4)), rng.standard_normal((8, 4))
    tokens = np.array([3, 7, 7, 12, 0, 5, 18, 9])

    def loss(E_):
        return float(np.sum(np.tanh(E_[tokens]) * C))
    dE = np.zeros_like(E)
    dE[tokens] = C * (1 - np.tanh(E[tokens]) ** 2)
    every = [np.unravel_index(k, E.shape) for k in range(E.size)]
    wrong = grad_check(loss, E, dE, every, 1e-6) > 1e-4
    assert wrong.sum() == 4 and {int(i[0]) for i, w in zip(every, wrong) if w} == {7}
    p = 1 - math.comb(76, 5) / math.comb(80, 5)
    assert round(p, 2) == 0.23
    printed = stored_output("03", "E_gc = rng_gc.standard_normal((20, 4))")
    assert "4 wrong, all in row(s) [7]" in printed
    caught = int(printed.split("that caught it: ")[1].split(" of")[0])
    assert abs(caught - 1000 * p) < 3 * math.sqrt(1000 * p * (1 - p))  # within three standard deviations


def test_03_dropout_misleads_the_checker_until_its_mask_is_held_fixed():
    from haaw.course.exercises.nb03 import grad_check
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(8), rng.standard_normal(8)

    def loss(x_, seed=None):
        mask = np.random.default_rng(seed).random(x_.shape) < 0.5
        return float(np.sum(np.tanh(w * x_ * mask * 2.0)))
    mask = np.random.default_rng(0).random(8) < 0.5
    grad = w * mask * 2.0 * (1 - np.tanh(w * x * mask * 2.0) ** 2)
    coords = [(i,) for i in range(8)]
    assert grad_check(loss, x, grad, coords, 1e-6).max() > 0.5
    assert grad_check(lambda x_: loss(x_, seed=0), x, grad, coords, 1e-6).max() < 1e-7
