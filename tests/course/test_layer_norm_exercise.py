"""05-layer-norm-backward: every correct way of writing it passes; wrong code written the way learners write it,
beyond the checker's named mistakes, is rejected and never misnamed; each named mistake is what its name says."""
import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import guard

KEY = "05-layer-norm-backward"
# the course\'s reference as a learner would have typed it (unguarded is refused inside check: fetched here)
REFERENCE = guard.unguarded(REGISTRY[KEY].reference)


def _stats(x, eps, ddof=0):
    mu = x.mean(axis=-1, keepdims=True)
    return mu, np.sqrt(x.var(axis=-1, keepdims=True, ddof=ddof) + eps)


# --- correct, written in other ways -------------------------------------------------------------------
def with_n_explicit(x, weight, G, eps=1e-5):
    n = x.shape[-1]
    mu, sigma = _stats(x, eps)
    xh = (x - mu) / sigma
    g = G * weight
    dx = (n * g - g.sum(-1, keepdims=True) - xh * (g * xh).sum(-1, keepdims=True)) / (n * sigma)
    flat = G.reshape(-1, n)
    return dx, (flat * xh.reshape(-1, n)).sum(0), flat.sum(0)


def step_by_step(x, weight, G, eps=1e-5):  # cs231n's staged chain rule
    n = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc ** 2).mean(-1, keepdims=True)
    inv = (var + eps) ** -0.5
    dxh = G * weight
    dvar = (dxh * xc).sum(-1, keepdims=True) * -0.5 * inv ** 3
    dmu = -(dxh * inv).sum(-1, keepdims=True) - 2 * dvar * xc.mean(-1, keepdims=True)
    dx = dxh * inv + dvar * 2 * xc / n + dmu / n
    axes = tuple(range(G.ndim - 1))
    return dx, (G * xc * inv).sum(axis=axes), G.sum(axis=axes)


def with_einsum_and_lists(x, weight, G, eps=1e-5):
    mu, sigma = _stats(x, eps)
    xh = (x - mu) / sigma
    g = G * weight
    dx = (g - g.mean(-1, keepdims=True) - xh * np.einsum("...i,...i->...", g, xh)[..., None] / x.shape[-1]) / sigma
    rows, n = G.reshape(-1, x.shape[-1]), x.shape[-1]
    return [dx, np.einsum("ri,ri->i", rows, xh.reshape(-1, n)), np.einsum("ri->i", rows)]


def with_torch(x, weight, G, eps=1e-5):
    import torch  # imported by the test first: an import inside the checker's time limit could run out of time

    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(weight, requires_grad=True)
    bt = torch.zeros_like(wt, requires_grad=True)
    torch.nn.functional.layer_norm(xt, wt.shape, wt, bt, eps).backward(torch.tensor(G))
    return xt.grad, wt.grad, bt.grad


@pytest.mark.parametrize("fn", [with_n_explicit, step_by_step, with_einsum_and_lists])
def test_every_correct_form_passes(fn):
    feedback = check(KEY, fn)
    assert feedback.status == CORRECT, feedback.message


def test_pytorch_s_autograd_computes_it_but_is_not_writing_it():
    """Letting PyTorch's autograd find the gradient gives the right numbers, and is refused by name."""
    pytest.importorskip("torch")
    feedback = check(KEY, with_torch)
    assert feedback.status == WRONG and "is not its own work" in feedback.message, feedback.message
    assert "PyTorch's autograd" in feedback.message and ".backward(" in feedback.message  # the learner's line


# --- wrong, none of them a named mistake ------------------------------------------------------------
def unbiased_variance(x, weight, G, eps=1e-5):
    mu, sigma = _stats(x, eps, ddof=1)
    xh = (x - mu) / sigma
    g = G * weight
    axes = tuple(range(G.ndim - 1))
    return (g - g.mean(-1, keepdims=True) - xh * (g * xh).mean(-1, keepdims=True)) / sigma, \
        (G * xh).sum(axis=axes), G.sum(axis=axes)


def eps_forgotten(x, weight, G, eps=1e-5):
    return REFERENCE(x, weight, G, 0.0)


def summed_over_the_first_axis_only(x, weight, G, eps=1e-5):
    dx, _, _ = REFERENCE(x, weight, G, eps)
    mu, sigma = _stats(x, eps)
    return dx, (G * (x - mu) / sigma).sum(axis=0), G.sum(axis=0)


def projection_with_a_plus(x, weight, G, eps=1e-5):
    mu, sigma = _stats(x, eps)
    xh = (x - mu) / sigma
    g = G * weight
    axes = tuple(range(G.ndim - 1))
    return (g - g.mean(-1, keepdims=True) + xh * (g * xh).mean(-1, keepdims=True)) / sigma, \
        (G * xh).sum(axis=axes), G.sum(axis=axes)


def dweight_from_x_not_x_hat(x, weight, G, eps=1e-5):
    dx, _, db = REFERENCE(x, weight, G, eps)
    return dx, (G * x).reshape(-1, x.shape[-1]).sum(0), db


def dbias_summed_to_one_number(x, weight, G, eps=1e-5):
    dx, dw, _ = REFERENCE(x, weight, G, eps)
    return dx, dw, G.sum()


def means_over_the_batch_axis(x, weight, G, eps=1e-5):
    mu = x.mean(axis=0, keepdims=True)
    sigma = np.sqrt(x.var(axis=0, keepdims=True) + eps)
    xh = (x - mu) / sigma
    g = G * weight
    axes = tuple(range(G.ndim - 1))
    return (g - g.mean(0, keepdims=True) - xh * (g * xh).mean(0, keepdims=True)) / sigma, \
        (G * xh).sum(axis=axes), G.sum(axis=axes)


def divided_by_the_variance(x, weight, G, eps=1e-5):
    dx, dw, db = REFERENCE(x, weight, G, eps)
    _, sigma = _stats(x, eps)
    return dx / sigma, dw, db  # σ² where σ belongs


def changes_G_in_place(x, weight, G, eps=1e-5):
    G *= weight
    return REFERENCE(x, np.ones_like(weight), G, eps)


@pytest.mark.parametrize("fn, words", [
    (unbiased_variance, "wrong values"),
    (eps_forgotten, "wrong values"),
    (summed_over_the_first_axis_only, "dweight has shape ()"),
    (projection_with_a_plus, "wrong values"),
    (dweight_from_x_not_x_hat, "dweight: wrong values"),
    (dbias_summed_to_one_number, "dbias has shape ()"),
    (means_over_the_batch_axis, "wrong values"),
    (divided_by_the_variance, "wrong values"),
    (changes_G_in_place, "changes one of its inputs in place"),
])
def test_wrong_code_is_rejected_and_not_misnamed(fn, words):
    feedback = check(KEY, fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message


def test_each_named_mistake_computes_what_its_name_says():
    """Against finite differences of a LayerNorm written here: the right dx, and each mistake's own quantity."""
    rng = np.random.default_rng(0)
    x, w, G, eps = rng.standard_normal((3, 5)), 1 + rng.standard_normal(5), rng.standard_normal((3, 5)), 1e-5

    def loss(x_, mu=None, sigma=None):
        m = x_.mean(-1, keepdims=True) if mu is None else mu
        s = np.sqrt(x_.var(-1, keepdims=True) + eps) if sigma is None else sigma
        return np.sum(G * ((x_ - m) / s) * w)

    def numeric(f):
        d, h = np.zeros_like(x), 1e-6
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = h
            d[i] = (f(x + e) - f(x - e)) / (2 * h)
        return d

    mistakes = {m.name: m.code for m in REGISTRY[KEY].mistakes}
    np.testing.assert_allclose(REFERENCE(x, w, G, eps)[0], numeric(loss), rtol=1e-6, atol=1e-8)
    mu, sigma = x.mean(-1, keepdims=True), np.sqrt(x.var(-1, keepdims=True) + eps)
    constants = numeric(lambda x_: loss(x_, mu, sigma))  # μ and σ held fixed
    np.testing.assert_allclose(mistakes["μ and σ treated as constants"](x, w, G, eps)[0], constants, rtol=1e-6)
    only_mean = numeric(lambda x_: loss(x_, sigma=sigma))  # σ held fixed: the mean's path only
    np.testing.assert_allclose(mistakes["the mean(g · x̂) term forgotten"](x, w, G, eps)[0], only_mean, rtol=1e-6)
