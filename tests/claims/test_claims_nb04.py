"""The claims of notebook 04: each figure or causal claim the notebook states, asserted.

The deep stacks are computed here a second time with NumPy alone (forward and a hand-written
backward), so that the figures do not rest on the engine that the notebook runs.
"""
from math import erf, exp, pi, sqrt
from pathlib import Path

import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.course.datasets import two_moons
from haaw.course.exercises import check
from haaw.course.exercises.nb04 import clip_grad_norm
from haaw.course.nb04 import deep_stack_grad_norms, grad_norms, stack
from haaw.nn import MLP, Linear
from haaw.nn.utils import clip_grad_norm_
from haaw.optim import SGD

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CORE = NOTEBOOKS / "04_gradient_flow.ipynb"
COMPANION = NOTEBOOKS / "deeper" / "04_gradient_flow_deeper.ipynb"

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
        parts.append({"sigma": z.std(), "z_rms": np.sqrt(np.mean(z**2)), "a_rms": np.sqrt(np.mean(a**2)), "spread": h_in.std(axis=-1).mean(),
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
    # the companion's stacks (haaw.course.nb04.stack), tanh included, are the same stacks
    for kw in ({"init_scale": 1.1}, {"activation": "tanh"}, {"init_scale": 3.0, "activation": "tanh", "normalise": True},
               {"init_scale": 0.9, "residual": True, "normalise": True}, {"width": 16, "seed": 3}):
        np.testing.assert_allclose(numpy_stack(50, **kw)[0], grad_norms(stack(50, **kw)), rtol=1e-9)


def test_04_the_introduction_s_fifty_factors_leave_what_it_says():
    """Fifty factors "slightly below 1" can leave most of the gradient (0.99⁵⁰ ≈ 0.61): the introduction names
    its factors, and each does what it says."""
    nbformat = pytest.importorskip("nbformat")
    intro = nbformat.read(CORE, as_version=4).cells[0].source
    assert "slightly below 1" not in intro
    assert "Fifty factors of 0.9 leave under a hundredth of it" in intro and "fifty of 1.1 make it over a hundred" in intro
    assert 0.9**50 < 0.01 and 1.1**50 > 100
    assert 0.99**50 > 0.6  # why "slightly below 1" was wrong: 0.99 leaves most of it


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
    # "scaling He's weights by 0.9 or 1.1 ... a first-layer gradient 0.00172 times the last layer's, or 32 times it"
    assert f"{numpy_stack(50, 0.9)[0][0] / numpy_stack(50, 0.9)[0][-1]:.3g}" == "0.00172"
    assert f"{numpy_stack(50, 1.1)[0][0] / numpy_stack(50, 1.1)[0][-1]:.0f}" == "32"
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
    assert f"{tanh:.3f}" == "0.958"  # the tanh stack's average factor per layer


def test_04_the_tanh_stack_loses_most_of_its_gradient_in_its_first_ten_layers_where_z_is_largest():
    norms, parts = numpy_stack(50, 1.0, activation="tanh")
    early, late = (norms[0] / norms[10]) ** (1 / 10), (norms[10] / norms[49]) ** (1 / 39)
    assert (f"{early:.3f}", f"{1 - early:.0%}", f"{late:.3f}", f"{1 - late:.0%}") == ("0.883", "12%", "0.979", "2%")
    share = np.log(norms[0] / norms[10]) / np.log(norms[0] / norms[-1])
    assert f"{share:.0%}" == "59%" and share > 0.5  # most of the loss, in a fifth of the layers
    assert f"{factor(norms):.3f}" == "0.958" and early < 0.958 < late  # "about 4%" is only the average
    z = [p["z_rms"] for p in parts]
    assert [f"{z[i]:.2f}" for i in (0, 10, 49)] == ["0.99", "0.22", "0.10"]
    assert all(p["a_rms"] < p["z_rms"] for p in parts)  # every tanh shrinks what it receives, |tanh(z)| < |z|
    assert z[0] > z[10] > z[49]
    assert f"{1 - np.tanh(1.0) ** 2:.2f}" == "0.42"  # tanh's slope at 1, where the data enters
    # where z is small, tanh's mean slope is near 1; where it is about 1, it is not
    rng = np.random.default_rng(0)
    for scale, low, high in ((0.99, 0.5, 0.7), (0.10, 0.97, 1.0)):
        slope = np.mean(1 - np.tanh(scale * rng.standard_normal(100_000)) ** 2)
        assert low < slope < high


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


def test_04_the_companion_derives_relu_s_spread_0_584_and_the_factor_root_pi_over_pi_minus_1():
    """ReLU(z) for z normal with spread σ: mean σ/√(2π), mean square σ²/2, so spread σ√((π − 1)/(2π)) ≈ 0.584σ;
    the gradient keeps 1/√2 of its norm, and the ratio is √(π/(π − 1)) ≈ 1.211 (σ = 1 below; σ cancels)."""
    z = np.linspace(-12.0, 12.0, 240_001)
    density = np.exp(-z**2 / 2) / np.sqrt(2 * np.pi)
    step = z[1] - z[0]
    mean, mean_square = (np.sum(np.maximum(z, 0) ** k * density) * step for k in (1, 2))
    assert mean == pytest.approx(1 / np.sqrt(2 * np.pi), rel=1e-9) and mean_square == pytest.approx(0.5, rel=1e-9)
    spread = np.sqrt((np.pi - 1) / (2 * np.pi))
    assert np.sqrt(mean_square - mean**2) == pytest.approx(spread, rel=1e-9)
    assert spread == pytest.approx(np.sqrt(0.5 - 0.5 / np.pi), rel=1e-15) and f"{spread:.3f}" == "0.584"
    assert (1 / np.sqrt(2)) / spread == pytest.approx(np.sqrt(np.pi / (np.pi - 1)), rel=1e-12)
    assert f"{np.sqrt(np.pi / (np.pi - 1)):.3f}" == "1.211"
    for sigma in (0.3, 4.0):  # σ cancels: the spread scales with σ, the ratio does not move
        sample = np.maximum(sigma * np.random.default_rng(2).standard_normal(2_000_000), 0)
        assert sample.std() / sigma == pytest.approx(spread, rel=2e-3)
    # the real stack's 1.225 sits above the normal-z prediction, by the 0.573 against 0.584 of its forward spread
    assert 1.211 < factor(numpy_stack(50, 1.0, normalise=True)[0], start=1) < 1.23
    # and the companion's cell computes, rather than states, each piece
    nbformat = pytest.importorskip("nbformat")
    cell = next(c for c in nbformat.read(COMPANION, as_version=4).cells
                if c.cell_type == "code" and "closed form √((π − 1)/(2π))" in c.source)
    printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
    assert "= 0.584 σ, integral 0.584 σ, sample 0.584 σ" in printed and "= 1.211 = √(π/(π − 1)) = 1.211" in printed


def test_04_the_dead_units_count_axis_has_whole_numbers_only():
    """The core's figure of dead units per step: its count axis is ticked at integers (it was at 2.5, 7.5, ...)."""
    nbformat = pytest.importorskip("nbformat")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    source = next(c.source for c in nbformat.read(CORE, as_version=4).cells
                  if c.cell_type == "code" and 'ylabel="dead units (of 32)"' in c.source)
    def dead_at(counts):  # the first `count` units dead at each step, as many as the notebook's runs have
        return np.arange(32)[None, :] < np.array(counts)[:, None]
    results = {0.5: (dead_at([7] * 30 + [3] * 170), True), 2.0: (dead_at([7, 10, 19] + [15] * 197), True)}
    shown = []
    namespace = {"np": np, "plt": plt, "MaxNLocator": MaxNLocator, "results": results,
                 "show_figure": lambda description: shown.append(plt.gcf())}
    exec(compile(source, "the dead-units cell", "exec"), namespace)
    (fig,) = shown
    ticks = fig.axes[0].get_yticks()
    assert len(ticks) >= 3 and np.all(ticks == np.round(ticks)), ticks
    plt.close(fig)


def test_04_layernorm_s_constant_factor_is_relu_s_with_tanh_it_is_another_and_moves_with_the_scale():
    relu = factor(numpy_stack(50, 1.0, normalise=True)[0], start=1)
    tanh = [factor(numpy_stack(50, s, activation="tanh", normalise=True)[0], start=1) for s in (0.5, 1.0, 2.0, 3.0)]
    assert [f"{f:.3f}" for f in tanh] == ["1.038", "1.081", "1.275", "1.442"]
    assert all(a < b for a, b in zip(tanh, tanh[1:])) and tanh[-1] - tanh[0] > 0.3  # the scale no longer cancels
    assert all(f > 1.03 for f in tanh) and relu > 1.2  # neither factor is 1
    # tanh's output spread cannot pass 1: it stops growing with the scale that Wᵀ multiplies in
    spread = {s: np.mean([p["spread"] for p in numpy_stack(50, s, activation="tanh", normalise=True)[1][1:]])
              for s in (0.5, 1.0, 3.0)}
    assert 0.75 * 0.5 < spread[0.5] < 0.5  # at small scales nearly the scale itself: tanh is almost linear there
    assert spread[3.0] < 1 and spread[3.0] / spread[1.0] < 1.5  # three times the weights, far less spread
    assert np.tanh(2 * 0.7) != pytest.approx(2 * np.tanh(0.7), rel=1e-2)  # tanh is not homogeneous
    z = np.random.default_rng(1).standard_normal(1000)
    assert np.allclose(np.maximum(2.5 * z, 0), 2.5 * np.maximum(z, 0))  # ReLU is
    # the normal-z prediction: ReLU(z)'s spread 0.584 σ, the gradient kept on half the entries 0.707, ratio 1.211
    big = np.random.default_rng(2).standard_normal(2_000_000)
    assert np.maximum(big, 0).std() == pytest.approx(np.sqrt(0.5 - 0.5 / np.pi), rel=2e-3)
    assert f"{np.sqrt(0.5 - 0.5 / np.pi):.3f}" == "0.584" and f"{1 / np.sqrt(2):.3f}" == "0.707"
    assert f"{1 / np.sqrt(2) / np.sqrt(0.5 - 0.5 / np.pi):.3f}" == "1.211"
    # "every branch input is normalised": what LayerNorm hands the branch has mean 0 and variance 1 per row
    h = np.random.default_rng(3).standard_normal((32, 64)) * 7 + 3
    out = F.layer_norm(Tensor(h), (64,)).data
    np.testing.assert_allclose(out.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=-1), 1, rtol=1e-5)


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


# --- initialisation: the variance rule, the deep stack's signal, symmetry, and Linear's default draw ---------------


def numpy_signal_scale(std, relu, depth=50, width=256, batch=64, seed=1):
    """The notebook's forward-only stack (same draws, same order), in NumPy: the root mean square of h per layer."""
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((batch, width))
    scales = [np.sqrt(np.mean(h**2))]
    for _ in range(depth):
        z = h @ rng.normal(0.0, std, (width, width))
        h = np.maximum(z, 0) if relu else z
        scales.append(np.sqrt(np.mean(h**2)))
    return np.array(scales)


def test_04_variance_one_over_fan_in_keeps_the_mean_square_and_a_relu_halves_it():
    rng = np.random.default_rng(1)  # the notebook's one layer
    h = rng.standard_normal((1000, 256))
    z = h @ rng.normal(0.0, np.sqrt(1 / 256), (256, 256))
    shown = (f"{np.mean(h**2):.3f}", f"{np.mean(z**2):.3f}", f"{np.mean(np.maximum(z, 0) ** 2):.3f}")
    assert shown == ("0.997", "0.992", "0.495")
    # the rule, over many draws: mean(z²) = fan-in · v · mean(h²), and ReLU keeps half of it
    for fan_in, v in ((16, 0.3), (200, 1 / 200), (50, 2 / 50)):
        hs = rng.standard_normal((4000, fan_in)) * 1.7
        zs = hs @ rng.normal(0.0, np.sqrt(v), (fan_in, 400))
        assert np.mean(zs**2) == pytest.approx(fan_in * v * np.mean(hs**2), rel=0.05)
        assert np.mean(np.maximum(zs, 0) ** 2) == pytest.approx(0.5 * np.mean(zs**2), rel=0.03)


def test_04_the_exercise_s_rule_keeps_the_signal_s_scale_over_fifty_layers_and_its_mistakes_do_not():
    from haaw.course.exercises.nb04 import init_std

    n = 256
    assert init_std((n, n), "relu") == np.sqrt(2 / n) and init_std((n, n), "linear") == np.sqrt(1 / n)
    assert init_std((784, 256), "relu") == pytest.approx(np.sqrt(2) / 28) and init_std((3, 500), "linear") == \
        pytest.approx(1 / np.sqrt(3))  # fan-in is shape[0] in haaw's layout
    relu, linear = numpy_signal_scale(np.sqrt(2 / n), True), numpy_signal_scale(np.sqrt(1 / n), False)
    assert (f"{relu[-1]:.3g}", f"{relu.min():.2f}", f"{relu.max():.2f}") == ("1.26", "0.84", "1.52")
    assert (f"{linear[-1]:#.3g}", f"{linear.min():.2f}", f"{linear.max():.2f}") == ("1.00", "0.97", "1.10")
    assert f"{relu[0]:.2f}" == "0.99"
    kept = np.concatenate([relu, linear])
    assert kept.min() > 0.8 and kept.max() < 1.6  # level on a chart from 1e-10 to 1e10
    forgot = numpy_signal_scale(1 / np.sqrt(n), True)
    outside = numpy_signal_scale(2 / np.sqrt(n), True)
    over_n = numpy_signal_scale(np.sqrt(2) / n, True)
    assert (f"{forgot[-1]:.3g}", f"{outside[-1]:.3g}", f"{over_n[-1]:.3g}") == ("3.77e-08", "4.24e+07", "7.87e-61")
    per_layer = lambda s: (s[-1] / s[0]) ** (1 / 50)  # noqa: E731
    assert per_layer(forgot) == pytest.approx(1 / np.sqrt(2), rel=0.03)  # "falls by √2 per layer"
    assert per_layer(outside) == pytest.approx(np.sqrt(2), rel=0.03)  # "grows by √2 per layer"
    assert per_layer(over_n) == pytest.approx(1 / 16, rel=0.03)  # "sixteen-fold (√256)"
    assert np.all(np.diff(np.log(forgot)) < 0) and np.all(np.diff(np.log(outside)) > 0)  # steadily
    assert np.argmax(over_n < 1e-10) <= 10  # out of the picture within ten layers


def test_04_square_layers_keep_the_gradient_s_mean_square_with_the_same_variance():
    rng = np.random.default_rng(4)
    n = 256
    W = rng.normal(0.0, np.sqrt(2 / n), (n, n))
    z = rng.standard_normal((2000, n))
    g = rng.standard_normal((2000, n))
    back = (g * (z > 0)) @ W.T  # ReLU's backward, then Wᵀ: a sum over the fan-out
    assert np.mean(back**2) == pytest.approx(np.mean(g**2), rel=0.05)


def test_04_the_exercise_s_rule_is_what_pytorch_draws():
    torch = pytest.importorskip("torch")
    from haaw.course.exercises.nb04 import init_std

    for nonlinearity in ("linear", "relu"):
        assert init_std((784, 256), nonlinearity) == pytest.approx(
            torch.nn.init.calculate_gain(nonlinearity) / np.sqrt(784), rel=1e-12)
        torch.manual_seed(0)
        w = torch.nn.init.kaiming_normal_(torch.empty(256, 784, dtype=torch.float64), mode="fan_in",
                                          nonlinearity=nonlinearity)
        assert w.numel() == 200_704 and abs(w.std().item() / init_std((784, 256), nonlinearity) - 1) < 0.01


@pytest.mark.upstream
def test_04_pytorch_s_gain_is_five_thirds_for_tanh_and_root_2_for_relu():
    torch = pytest.importorskip("torch")
    assert torch.nn.init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert torch.nn.init.calculate_gain("relu") == pytest.approx(np.sqrt(2))


def numpy_train_from(W1, b1, W2, b2, steps=300, lr=0.5):
    """The notebook's 2-16-2 ReLU network trained with plain SGD, its backward written out in NumPy."""
    points, labels = two_moons(256, noise=0.15, seed=2)
    W1, b1, W2, b2 = (np.array(a, dtype=np.float64) for a in (W1, b1, W2, b2))
    T = np.eye(2)[labels]
    got_gradient = False
    for _ in range(steps):
        z = points @ W1 + b1
        h = np.maximum(z, 0)
        logits = h @ W2 + b2
        shifted = logits - logits.max(axis=1, keepdims=True)
        P = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        loss = -np.mean(np.log(P[np.arange(len(labels)), labels]))
        G = (P - T) / len(labels)
        dW2, db2 = h.T @ G, G.sum(axis=0)
        dz = (G @ W2.T) * (z > 0)
        dW1, db1 = points.T @ dz, dz.sum(axis=0)
        got_gradient |= bool(np.any(dW1 != 0))
        W1, b1, W2, b2 = W1 - lr * dW1, b1 - lr * db1, W2 - lr * dW2, b2 - lr * db2
    units = np.concatenate([W1, b1[None], W2.T])
    logits = np.maximum(points @ W1 + b1, 0) @ W2 + b2
    accuracy = np.mean(np.argmax(logits, axis=1) == labels)
    # what one hidden unit could compute: unit 0 alone, its output weights times the number of units
    one_unit = np.maximum(points @ W1[:, :1] + b1[:1], 0) @ (len(b1) * W2[:1]) + b2
    return loss, accuracy, np.max(np.abs(units - units[:, :1])), got_gradient, np.allclose(logits, one_unit, atol=1e-9)


def test_04_weights_that_start_equal_stay_equal_and_zeros_never_get_a_gradient():
    first, second = MLP([2, 16, 2], seed=3).layers  # the notebook's random start (its numbers only)
    shown = {}
    for start in ("random", 0.5, 0.0):
        if start == "random":
            params = first.weight.data, first.bias.data, second.weight.data, second.bias.data
        else:
            params = np.full((2, 16), start), np.zeros(16), np.full((16, 2), start), np.zeros(2)
        loss, accuracy, spread, got_gradient, one_unit = numpy_train_from(*params)
        shown[start] = (f"{loss:.3f}", f"{accuracy:.0%}", spread < 1e-12, got_gradient)
        assert one_unit == (start != "random")  # equal units compute what a single hidden unit could
    assert shown == {"random": ("0.112", "96%", False, True), 0.5: ("0.304", "86%", True, True),
                     0.0: ("0.693", "50%", True, False)}
    assert f"{np.log(2):.3f}" == "0.693"  # a coin toss between two classes


def test_04_linear_s_default_draw_has_a_third_of_the_variance_that_keeps_the_scale():
    n = 512
    layer = Linear(n, n, seed=0)
    assert np.abs(layer.weight.data).max() <= 1 / np.sqrt(n)  # uniform on ±1/√fan-in, as PyTorch's default
    assert layer.weight.data.std() == pytest.approx(1 / np.sqrt(3 * n), rel=0.01)  # a/√3
    x = np.random.default_rng(0).standard_normal((2000, n))
    out = layer(Tensor(x)).data
    assert np.sqrt(np.mean(out**2) / np.mean(x**2)) == pytest.approx(1 / np.sqrt(3), rel=0.03)  # shrinks by √3
    h = x
    for k in range(5):  # with a ReLU after each layer: by √6 per layer
        h = np.maximum(Linear(n, n, bias=False, seed=k + 1)(Tensor(h)).data, 0)
    assert (np.mean(h**2) / np.mean(x**2)) ** (1 / 10) == pytest.approx(1 / np.sqrt(6), rel=0.03)
    # He's rule drawn uniformly: the bound √(6/fan-in), whose variance a²/3 is 2/fan-in; √6 times Linear's bound
    assert (np.sqrt(6 / n) ** 2) / 3 == pytest.approx(2 / n) and np.sqrt(6 / n) / (1 / np.sqrt(n)) == pytest.approx(
        np.sqrt(6))
    assert (1 / (3 * n)) / (2 / n) == pytest.approx(1 / 6)  # "a sixth of He's 2/fan-in"
