"""The claims of notebook 04: each figure or causal claim the notebook states, asserted.

The deep stacks are computed here a second time with NumPy alone (forward and a hand-written
backward), so that the figures do not rest on the engine that the notebook runs.
"""
from math import erf, exp, pi, sqrt

import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.course.datasets import two_moons
from haaw.course.exercises import check
from haaw.course.exercises.nb04 import clip_grad_norm
from haaw.course.nb04 import deep_stack_grad_norms
from haaw.nn import MLP
from haaw.nn.utils import clip_grad_norm_
from haaw.optim import SGD


def numpy_stack(depth, init_scale=1.0, *, activation="relu", residual=False, normalise=False, width=64, batch=32,
                seed=0, eps=1e-5):
    """The notebook's stack (same random numbers, same order), with its backward written out by hand.

    Returns ‖dL/dh‖ at every layer's input, and per layer what the LayerNorm analysis reads."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((batch, width))
    std = init_scale * np.sqrt((2.0 if activation == "relu" else 1.0) / width)
    if residual:
        std /= np.sqrt(depth)
    cache = []
    for _ in range(depth):
        W = rng.normal(0.0, std, (width, width))
        if normalise:
            centred = h - h.mean(axis=-1, keepdims=True)
            spread = np.sqrt((centred**2).mean(axis=-1, keepdims=True) + eps)
            u = centred / spread
        else:
            u, spread = h, None
        z = u @ W
        a = np.maximum(z, 0) if activation == "relu" else np.tanh(z)
        cache.append((h, u, spread, W, z, a))
        h = h + a if residual else a
    g = rng.standard_normal((batch, width))
    norms, parts = [], []
    for h_in, u, spread, W, z, a in reversed(cache):
        g_z = g * (z > 0) if activation == "relu" else g * (1 - a * a)
        g_u = g_z @ W.T
        if normalise:  # LayerNorm's backward: (g − mean g − u·mean(g·u)) / spread
            g_h = (g_u - g_u.mean(axis=-1, keepdims=True) - u * (g_u * u).mean(axis=-1, keepdims=True)) / spread
        else:
            g_h = g_u
        if residual:
            g_h = g_h + g
        parts.append({"sigma": z.std(), "spread": h_in.std(axis=-1).mean(),
                      "relu_and_W": np.linalg.norm(g_u) / np.linalg.norm(g),
                      "through_ln": np.linalg.norm(g_h) / np.linalg.norm(g_u)})
        norms.append(np.linalg.norm(g_h))
        g = g_h
    return np.array(norms[::-1]), parts[::-1]


def factor(norms, start=0):
    return (norms[start] / norms[-1]) ** (1 / (len(norms) - 1 - start))


def test_04_the_numpy_stack_is_the_engine_s_stack():
    for kw in ({"init_scale": 0.9}, {"init_scale": 1.1, "residual": True}, {"normalise": True},
               {"init_scale": 0.9, "residual": True, "normalise": True}):
        np.testing.assert_allclose(numpy_stack(50, **kw)[0], deep_stack_grad_norms(50, **kw), rtol=1e-9)


def test_04_the_residual_branch_passes_the_gradient_with_factor_1():
    rng = np.random.default_rng(0)  # the notebook's draws: x0, W, then G
    x0, W, G = rng.standard_normal((4, 8)), rng.standard_normal((8, 8)) * 1e-6, rng.standard_normal((4, 8))
    through_F = (G * (1 - np.tanh(x0 @ W) ** 2)) @ W.T
    plain = np.linalg.norm(through_F) / np.linalg.norm(G)
    residual = np.linalg.norm(G + through_F) / np.linalg.norm(G)
    assert f"{plain:.6f}" == "0.000003" and f"{residual:.6f}" == "1.000000"
    assert residual == pytest.approx(1.0, abs=1e-5) and plain < 1e-5
    assert 2.0 * (1 + 0.001) == pytest.approx(2.002)  # exercise 1


def test_04_depth_multiplies_and_the_plain_stack_vanishes_or_explodes():
    assert f"{0.9**50:.4g}" == "0.005154" and f"{1.1**50:.1f}" == "117.4"
    assert check("04-product", "0.005154").correct and check("04-product", 0.9**50).correct
    assert not check("04-product", 0.9**49).correct  # 50 layers between the top and the stack's input
    # "ten percent per layer ... about two orders of magnitude; even four percent (0.96⁵⁰ ≈ 0.13) is nearly one"
    assert [f"{abs(np.log10(f ** 50)):.1f}" for f in (0.9, 1.1, 0.96)] == ["2.3", "2.1", "0.9"]
    assert f"{0.96**50:.2f}" == "0.13" and 0.5 < -np.log10(0.96**50) < 1
    # near misses: rounded too far gets the rounding message; the answer as a percentage is told so
    for rounded in (0.005, "0.005", 0.0052):
        assert "rounded to" in check("04-product", rounded).message
    for percent in (0.5, 0.515, 0.5154, "0.515", 0.52):
        feedback = check("04-product", percent)
        assert not feedback.correct and "percentage" in feedback.message and "0.00515" in feedback.message
    logs = {}
    for scale in (0.9, 1.1):
        for name, kw in (("plain", {}), ("residual", {"residual": True}),
                         ("residual + LayerNorm", {"residual": True, "normalise": True})):
            norms = numpy_stack(50, init_scale=scale, **kw)[0]
            logs[scale, name] = np.log10(norms[0] / norms[-1])
    assert f"{logs[0.9, 'plain']:+.1f}" == "-2.8" and f"{logs[1.1, 'plain']:+.1f}" == "+1.5"
    for scale in (0.9, 1.1):
        assert abs(logs[scale, "residual"]) < 1  # within a factor of ten
        assert abs(logs[scale, "residual + LayerNorm"]) < abs(logs[scale, "residual"])  # closer still
    assert [f"{logs[s, n]:+.1f}" for s in (0.9, 1.1) for n in ("residual", "residual + LayerNorm")] == \
        ["+0.5", "+0.2", "+0.8", "+0.2"]


def test_04_scaling_the_weights_scales_every_relu_layer_s_factor_exactly():
    he = factor(numpy_stack(50, 1.0)[0])
    assert f"{he:.4f}" == "0.9757" and f"{he:.3f}" == "0.976"
    for s, shown in ((0.9, "0.878"), (1.1, "1.073")):
        measured = factor(numpy_stack(50, s)[0])
        assert measured == pytest.approx(s * he, rel=1e-12)  # not noise: exactly s times He's own factor
        assert f"{measured:.3f}" == shown
    tanh = factor(numpy_stack(50, 1.0, activation="tanh")[0])
    assert f"{tanh:.3f}" == "0.958"  # "loses about 4% per layer"
    tanh_norms = numpy_stack(50, 1.0, activation="tanh")[0]
    assert 0.5 < -np.log10(tanh_norms[0] / tanh_norms[-1]) < 1  # "nearly one order of magnitude" (section 2)


def test_04_he_s_scale_keeps_the_mean_square_but_the_typical_factor_falls_short_at_finite_width():
    shown = {16: ("1.011", "0.949", "0.886", "1.010"), 32: ("0.994", "0.976", "0.945", "1.002"),
             64: ("0.991", "0.989", "0.973", "1.002")}
    geometric = {}
    for width in (16, 32, 64):
        per_layer, per_stack = [], []
        for seed in range(10):
            norms = numpy_stack(50, width=width, seed=seed)[0]
            per_layer.append(norms[:-1] / norms[1:])
            per_stack.append(factor(norms))
        f = np.concatenate(per_layer)
        geometric[width] = np.exp(np.mean(np.log(f)))
        assert (f"{np.mean(f**2):.3f}", f"{geometric[width]:.3f}", f"{min(per_stack):.3f}",
                f"{max(per_stack):.3f}") == shown[width]
        assert abs(np.mean(f**2) - 1) < 0.02  # the mean square is kept
        assert geometric[width] < 1  # the typical factor is not
    assert geometric[16] < geometric[32] < geometric[64]  # closer to 1 as the layers widen


def test_04_layernorm_alone_amplifies_by_the_same_factor_at_every_init_scale():
    factors = [factor(numpy_stack(50, s, normalise=True)[0], start=1) for s in (0.5, 1.0, 2.0, 3.0)]
    assert all(f"{f:.4f}" == "1.2250" for f in factors)
    assert max(factors) - min(factors) < 1e-6  # scale invariance: the init scale cancels
    norms = numpy_stack(100, 0.9, normalise=True)[0]
    assert f"{norms[0] / norms[-1]:.3g}" == "2.19e+08"
    # the breakdown: ReLU output's spread ≈ 0.58σ, ReLU and Wᵀ ≈ σ/√2, LayerNorm ≈ 1/spread
    assert f"{np.sqrt(0.5 - 0.5 / np.pi):.3f}" == "0.584" and f"{1 / np.sqrt(1 - 1 / np.pi):.3f}" == "1.211"
    for scale in (1.0, 3.0):
        parts = numpy_stack(50, scale, normalise=True)[1]
        spread = np.exp(np.mean(np.log([p["spread"] / q["sigma"] for q, p in zip(parts, parts[1:])][:-1])))
        relu = np.exp(np.mean(np.log([p["relu_and_W"] / p["sigma"] for p in parts[1:-1]])))
        ln = np.exp(np.mean(np.log([p["through_ln"] * p["spread"] for p in parts[1:-1]])))
        assert (f"{spread:.3f}", f"{relu:.3f}", f"{ln:.3f}") == ("0.573", "0.695", "1.008")
        assert relu * ln / spread == pytest.approx(1.2250, abs=0.002)


def test_04_saturation_tanh_and_sigmoid_slopes_vanish_and_sigmoid_s_never_exceeds_a_quarter():
    x = np.linspace(-20, 20, 40001)
    sigmoid = 1 / (1 + np.exp(-x))
    assert np.max(sigmoid * (1 - sigmoid)) == pytest.approx(0.25) and x[np.argmax(sigmoid * (1 - sigmoid))] == 0
    assert 1 - np.tanh(10.0) ** 2 < 1e-8 and (1 / (1 + np.exp(-10.0))) * (1 - 1 / (1 + np.exp(-10.0))) < 1e-4


def test_04_the_table_s_slopes_in_x_are_the_exercises_slopes_in_y_and_gelu_s_slope_fades():
    x = np.linspace(-8, 8, 1601)
    y = np.tanh(x)
    np.testing.assert_allclose(4 / (np.exp(x) + np.exp(-x)) ** 2, 1 - y * y, atol=1e-15)  # tanh's slope, with y
    sig = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(np.exp(-x) / (1 + np.exp(-x)) ** 2, sig * (1 - sig), atol=1e-15)
    assert np.allclose((np.exp(x) + np.exp(-x)) ** 2 - (np.exp(x) - np.exp(-x)) ** 2, 4)

    def gelu_slope(v):  # d/dv of v Φ(v)
        return 0.5 * (1 + erf(v / sqrt(2))) + v * exp(-v * v / 2) / sqrt(2 * pi)
    assert gelu_slope(-0.5) > 0 and gelu_slope(-1.0) < 0  # not 0 for moderately negative inputs; even negative
    assert abs(gelu_slope(-10.0)) < 1e-18  # and it fades to 0 for very negative ones


def test_04_a_dead_relu_unit_passes_no_gradient_to_its_weights():
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


def test_04_dead_units_are_frozen_while_dead_yet_some_fire_again():
    points, labels = two_moons(256, noise=0.15, seed=2)
    x = Tensor(points)
    runs = {}
    for lr in (0.5, 2.0):
        model = MLP([2, 32, 32, 2], seed=5)
        first, second, last = model.layers
        optimizer = SGD(model.parameters(), lr=lr)
        dead_at, w1, w2, b2 = [], [], [], []
        for _ in range(200):
            w1.append(first.weight.data.copy()), w2.append(second.weight.data.copy()), b2.append(second.bias.data.copy())
            pre = second(first(x).relu())
            loss = F.cross_entropy(last(pre.relu()), labels)
            optimizer.zero_grad()
            loss.backward()
            dead = np.all(pre.data <= 0, axis=0)
            np.testing.assert_array_equal(np.all(second.weight.grad == 0, axis=0), dead)
            dead_at.append(dead)
            optimizer.step()
            # the step leaves a dead unit's weights and bias exactly where they were
            np.testing.assert_array_equal(second.weight.data[:, dead], w2[-1][:, dead])
            np.testing.assert_array_equal(second.bias.data[dead], b2[-1][dead])
        runs[lr] = np.array(dead_at), w1
    counts = {lr: runs[lr][0].sum(axis=1)[[0, 50, 199]].tolist() for lr in runs}
    assert counts == {0.5: [7, 3, 4], 2.0: [7, 17, 15]}
    revived = {lr: [u for u in range(32) if d[:, u].any() and not d[np.argmax(d[:, u]):, u].all()]
               for lr, (d, _) in runs.items()}
    assert len(revived[0.5]) == 4 and len(revived[2.0]) == 7
    dead_at, w1 = runs[0.5]
    unit = revived[0.5][0]
    assert unit == 0 and dead_at[:34, 0].all() and not dead_at[34, 0]
    assert np.linalg.norm(w1[34] - w1[0]) > 0.5  # what fed it moved, though its own weights did not


def test_04_clipping_rescues_the_bad_init_but_the_norm_stays_above_the_threshold():
    points, labels = two_moons(256, noise=0.15, seed=2)
    x = Tensor(points)

    def train(max_norm, multiplier=4.0, engine=False):
        model = MLP([2] + [32] * 10 + [2], seed=7)
        params = model.parameters()
        for name, p in model.named_parameters():
            if name.endswith("weight"):  # He's scale is a rule for the weights: the biases keep their draw
                p.data *= multiplier
        optimizer = SGD(params, lr=0.01)
        losses, norms = [], []
        with np.errstate(over="ignore", invalid="ignore"):
            for _ in range(200):
                loss = F.cross_entropy(model(x), labels)
                optimizer.zero_grad()
                loss.backward()
                if engine:
                    norms.append(clip_grad_norm_(params, max_norm))
                else:
                    clipped, norm = clip_grad_norm([p.grad for p in params], max_norm)
                    for p, g in zip(params, clipped):
                        p.grad = g
                    norms.append(norm)
                optimizer.step()
                losses.append(loss.item())
        return np.array(losses), np.array(norms)

    unclipped, unclipped_norms = train(np.inf)
    assert np.flatnonzero(~np.isfinite(unclipped))[0] == 5
    # "the step makes the next gradient larger": the loss and the norm grow at every step until nan
    assert np.all(np.diff(unclipped[:5]) > 0) and np.all(np.diff(unclipped_norms[:5]) > 0)
    assert f"{unclipped[0]:.3g}" == "232" and f"{unclipped_norms[0]:.3g}" == "1.09e+03"
    assert 1e64 < unclipped[4] < 1e66  # "about 10⁶⁵ in five steps"
    losses, norms = train(1.0)
    engine_losses, engine_norms = train(1.0, engine=True)
    np.testing.assert_allclose(losses, engine_losses, rtol=1e-12)  # the exercise's function = clip_grad_norm_
    assert f"{losses[-1]:.3f}" == "0.067" and f"{norms.min():.3g}" == "21.9" and norms.min() > 10 * 1.0
    he_losses, he_norms = train(np.inf, multiplier=np.sqrt(6))
    assert f"{he_losses[-1]:.3f}" == "0.076" and he_norms[-1] < 1.0 and np.all(np.isfinite(he_losses))
    assert np.all(he_norms[8:] < 1.0) and he_norms[20:].max() < 0.7  # "well below the threshold after the first steps"
    assert f"{np.sqrt(6):.2f}" == "2.45" and f"{4 / np.sqrt(6):.2f}" == "1.63"
