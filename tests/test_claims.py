"""The claims ledger of COURSE.md: each figure or causal claim the course states, asserted."""
import numpy as np
import pytest

from haaw import Value
from haaw.engine import autograd

from haaw.tools import gradcheck
from haaw.engine.forward_mode import forward_mode_gradient
from haaw.course.nb01 import tiny_chain_step


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


def test_02_a_value_used_twice_receives_the_sum_of_both_contributions():
    a, b = Value(3.0), Value(4.0)
    (a * b + a).backward()
    by_hand = b.data * 1.0 + 1.0  # through a·b, plus through the +
    assert a.grad == by_hand == 5.0
    torch = pytest.importorskip("torch")
    ta = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    (ta * torch.tensor(4.0, dtype=torch.float64) + ta).backward()
    assert ta.grad.item() == a.grad


def test_02_shared_weight_gradient_is_the_sum_over_its_uses():
    def unrolled(weights, xs=(0.5, -1.0, 2.0)):
        h = Value(0.4)
        for weight, x_t in zip(weights, xs):
            h = (weight * h + x_t).tanh()
        return (h - 0.3) ** 2

    shared = Value(0.7)
    unrolled([shared] * 3).backward()
    copies = [Value(0.7) for _ in range(3)]
    unrolled(copies).backward()
    assert all(c.grad != 0 for c in copies)
    assert shared.grad == pytest.approx(sum(c.grad for c in copies), rel=1e-12)


def test_02_reverse_mode_one_backward_pass_forward_mode_one_pass_per_parameter(monkeypatch):
    n = 9

    def loss(*params):
        z = params[-1]
        for i, p in enumerate(params[:-1]):
            z = z + p * (0.3 * i - 1.0)
        return (z.tanh() - 0.25) ** 2

    values = [0.1 * (i - 4) for i in range(n)]
    calls = {"f": 0, "backward": 0}

    def counted(*params):
        calls["f"] += 1
        return loss(*params)

    forward_grads, passes = forward_mode_gradient(counted, values)
    assert passes == calls["f"] == n

    real_backward = autograd.backward

    def counted_backward(*args, **kwargs):
        calls["backward"] += 1
        return real_backward(*args, **kwargs)

    monkeypatch.setattr(autograd, "backward", counted_backward)
    calls["f"] = 0
    params = [Value(v) for v in values]
    counted(*params).backward()
    assert calls == {"f": 1, "backward": 1}
    assert [p.grad for p in params] == pytest.approx(forward_grads, rel=1e-12)


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


def test_05_a_saturated_softmax_crushes_the_gradient():
    from haaw.course.nb05 import softmax_gradient_norm

    z = np.random.default_rng(0).standard_normal(16)
    norms = [softmax_gradient_norm(scale * z) for scale in (1, 10, 30, 100)]
    assert norms == sorted(norms, reverse=True)
    assert norms[-1] < 1e-10 * norms[0]


def test_05_dividing_by_sqrt_dk_keeps_the_score_variance_near_1():
    from haaw.course.nb05 import attention_row, score_variance

    for d_k in (4, 64, 1024):
        assert score_variance(d_k, scaled=False) == pytest.approx(d_k, rel=0.1)
        assert score_variance(d_k, scaled=True) == pytest.approx(1.0, abs=0.1)
    unscaled, scaled = attention_row(512, scaled=False), attention_row(512, scaled=True)
    assert unscaled["max weight"] > 0.999 and scaled["max weight"] < 0.5
    assert unscaled["gradient norm"] < 1e-5 * scaled["gradient norm"]


def test_06_checkpointing_saves_activation_memory_at_about_a_third_more_flops():
    from haaw.course.nb06 import measure

    plain = measure(depth=8, width=16, batch=8, segment=None, repeats=0)
    every = measure(depth=8, width=16, batch=8, segment=1, repeats=0)
    assert every["peak bytes"] < 0.3 * plain["peak bytes"]
    extra = every["recompute"] / (plain["forward"] + plain["backward"])
    assert 0.30 < extra < 0.36  # one more forward on top of forward + about two forwards of backward
    assert plain["recompute"] == 0 and every["seconds"] is None


def test_07_fp16_underflows_small_gradients_scaling_recovers_them_bf16_needs_it_less():
    from haaw.amp import cast_report
    from haaw.course.nb07 import trained_gradients

    grads = trained_gradients(steps=100)["dL/dlogits"]
    plain, scaled, bf16 = (cast_report(grads, "float16"), cast_report(grads, "float16", 2**10),
                           cast_report(grads, "bfloat16"))
    assert plain["zero"] > 0.3  # more than a third of a real model's gradients vanish in fp16
    assert scaled["zero"] < 0.05 and scaled["inf"] == 0
    assert bf16["zero"] == 0.0


def test_08_masking_after_the_reduction_makes_the_gradient_depend_on_padding_length():
    from haaw.course.nb08 import gradient, make_model, masked_mean, mean_over_padded, padded_batch

    model = make_model()
    short, long = padded_batch(pad_to=6), padded_batch(pad_to=12)
    (_, right_short), (_, right_long) = gradient(model, masked_mean, short), gradient(model, masked_mean, long)
    (_, wrong_short), (_, wrong_long) = gradient(model, mean_over_padded, short), gradient(model, mean_over_padded, long)
    for a, b in zip(right_short, right_long):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)  # same data, same gradient
    assert np.linalg.norm(wrong_short[0]) == pytest.approx(2 * np.linalg.norm(wrong_long[0]), rel=1e-9)


def test_09_accumulating_k_microbatches_of_loss_over_k_equals_one_big_batch():
    from haaw.course.nb09 import initial_weights, make_data, model_with, summed_loss

    x, y = make_data(64)
    weights = initial_weights()
    big = model_with(weights)
    (summed_loss(big, x, y) / 64).backward()
    accumulated = model_with(weights)
    for rows in np.array_split(np.arange(64), 4):
        (summed_loss(accumulated, x[rows], y[rows]) / 16 / 4).backward()
    for a, b in zip(accumulated.parameters(), big.parameters()):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-12, atol=1e-15)


def test_09_averaging_over_workers_equals_the_big_batch_simulated_and_real():
    from haaw.course.nb09 import all_reduce_with_torch, ring_all_reduce, ring_bytes_per_worker
    from haaw.course.nb09 import initial_weights, make_data, shard_gradient

    x, y = make_data(64)
    weights = initial_weights()
    big = np.concatenate([g.ravel() for g in shard_gradient(weights, x, y)])
    local = [np.concatenate([g.ravel() for g in shard_gradient(weights, x[s], y[s])])
             for s in np.array_split(np.arange(64), 4)]
    summed, sent = ring_all_reduce(local)
    for worker in summed:
        np.testing.assert_allclose(worker / 4, big, rtol=1e-12, atol=1e-15)
    assert sent == ring_bytes_per_worker(4, big.nbytes)
    pytest.importorskip("torch")
    per_process = all_reduce_with_torch([(x[:32], y[:32]), (x[32:], y[32:])], weights)
    for grads in per_process:
        np.testing.assert_allclose(np.concatenate([g.ravel() for g in grads]), big, rtol=1e-12, atol=1e-15)
