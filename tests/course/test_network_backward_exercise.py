"""05-network-backward (05+, "Backprop by hand, whole"): the check compares each of the 12 gradients on its own
against the engine's and names the first wrong one in backward's order; correct code written other ways passes;
wrong code beyond the named mistakes is refused, named only when it is that mistake; a function written half-way
is told what is right so far; the engine's backward and PyTorch's autograd are no way to pass."""

import numpy as np
import pytest

from haaw import Tensor
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises import nb05 as exercises
from haaw.course.exercises.core import CORRECT, NOT_ATTEMPTED, WRONG
from haaw.course.nb05 import ORDER, engine_gradients, init_network, network_forward
from haaw.engine import guard

KEY = "05-network-backward"
reference = guard.unguarded(exercises.network_backward)


def _solution():
    namespace = {"np": np}
    exec(exercises.NETWORK_SOLUTION, namespace)
    return namespace["network_backward"]


def _replace(name, value_of):
    """The reference with the gradient ``name`` replaced by ``value_of(s, grads)``, everything before it right and
    everything after it computed from the right one: a mistake in one tensor only."""
    def fn(s):
        grads = list(reference(s))
        grads[ORDER.index(name)] = value_of(s, dict(zip(ORDER, grads)))
        return tuple(grads)
    fn.__name__ = f"wrong_{name}"
    return fn


# --- the order of the message -----------------------------------------------------------------------------
def test_the_solution_passes_and_the_engine_agrees_with_it():
    assert check(KEY, _solution()).status == CORRECT
    net = init_network()
    ours, engine = reference(network_forward(**net)), engine_gradients(**net)
    for name, mine in zip(ORDER, ours):
        np.testing.assert_allclose(mine, engine[name], rtol=1e-10, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("name", ORDER)
def test_a_wrong_tensor_is_named_as_the_first_wrong_one_with_the_ones_before_it_right(name):
    """One tensor off by 10%: the message names it, says every tensor before it is right, and no other is wrong."""
    feedback = check(KEY, _replace(name, lambda s, g: g[name] * 1.1))
    assert feedback.status == WRONG, feedback.message
    i = ORDER.index(name)
    said = exercises.NETWORK_SAID[name]
    if i == 0:
        assert f"the first gradient backward computes is wrong: {said}: wrong values" in feedback.message
    else:
        before = ORDER[:i]
        listed = before[0] if i == 1 else ", ".join(before[:-1]) + " and " + before[-1]
        assert f"{listed} {'is' if i == 1 else 'are'} right; the first wrong one is {said}: wrong values" \
            in feedback.message, feedback.message
    assert "wrong as well" not in feedback.message and "This looks like" not in feedback.message


def test_the_ones_after_the_first_wrong_are_said_to_be_wrong_too():
    def upstream_wrong(s):  # dh wrong, and carried on: everything after it is computed from the wrong dh
        grads = dict(zip(ORDER, reference(s)))
        dh = grads["dh"] * 2
        return (*[grads[n] for n in ORDER[:3]], dh, dh * (1 - s.h ** 2), *[grads[n] * 0 + 1 for n in ORDER[5:]])
    message = check(KEY, upstream_wrong).message
    assert "the first wrong one is dh (dL/dh, after tanh)" in message
    assert "dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb and dC are wrong as well: fix dh first" in message


# --- written half-way ----------------------------------------------------------------------------------------
def _first(n, wrong=None):
    def half_way(s):
        grads = list(reference(s))
        if wrong is not None:
            grads[wrong] = grads[wrong] + 1
        return (*grads[:n], *([...] * (len(ORDER) - n)))
    return half_way


def test_a_function_written_half_way_is_told_what_is_right_so_far():
    feedback = check(KEY, _first(4))
    assert feedback.status == NOT_ATTEMPTED
    assert "So far so good: dlogits, dW2, db2 and dh are right on every case. Next, dhbn" in feedback.message
    assert "dlogits is right on every case" in check(KEY, _first(1)).message
    assert "Not attempted yet: dlogits" in check(KEY, _first(0)).message


def test_a_wrong_tensor_among_the_first_ones_written_is_named():
    feedback = check(KEY, _first(5, wrong=3))
    assert feedback.status == WRONG
    assert "dlogits, dW2 and db2 are right; the first wrong one is dh (dL/dh, after tanh)" in feedback.message
    assert "wrong as well" not in feedback.message  # dhbn, written after it, is right


def test_a_placeholder_used_by_a_later_line_is_said_to_be_unfinished():
    def uses_a_placeholder(s):
        dlogits = ...
        dW2 = s.h.T @ dlogits
        return (dlogits, dW2, *([...] * 10))
    feedback = check(KEY, uses_a_placeholder)
    assert feedback.status == NOT_ATTEMPTED and "holds a `...` that a line after it uses" in feedback.message


# --- correct, written in other ways ------------------------------------------------------------------------
def with_bincount_style_one_hot(s):
    """dC as a product with a one-hot matrix of the positions (V × positions), instead of np.add.at."""
    grads = list(reference(s))
    V, E = s.C.shape
    where = np.zeros((V, s.idx.size), dtype=s.C.dtype)
    where[s.idx.ravel(), np.arange(s.idx.size)] = 1
    grads[-1] = where @ grads[-2].reshape(-1, E)
    return tuple(grads)


def with_a_loop_over_positions(s):
    grads = list(reference(s))
    dC = np.zeros_like(s.C)
    for b in range(s.idx.shape[0]):
        for t in range(s.idx.shape[1]):
            dC[s.idx[b, t]] += grads[-2][b, t]  # one position at a time: a repeat adds
    grads[-1] = dC
    return tuple(grads)


def with_batch_norm_in_stages(s):
    """BatchNorm's backward staged as cs231n writes it: through the variance, then the mean."""
    grads = dict(zip(ORDER, reference(s)))
    B = s.hpre.shape[0]
    xc = s.hpre - s.hpre.mean(0)
    inv = 1 / s.bn_sigma
    dhhat = grads["dhbn"] * s.gamma
    dvar = (dhhat * xc).sum(0) * -0.5 * inv ** 3
    dmu = -(dhhat * inv).sum(0) + dvar * (-2 * xc).mean(0)
    dhpre = dhhat * inv + dvar * 2 * xc / B + dmu / B
    grads["dhpre"] = dhpre
    grads["dW1"] = s.flat.T @ dhpre
    return tuple(grads[n] for n in ORDER)


def with_softmax_recomputed_and_a_list(s):
    grads = list(reference(s))
    z = s.logits - s.logits.max(1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    p[np.arange(len(s.y)), s.y] -= 1
    grads[0] = p / len(s.y)
    return grads


@pytest.mark.parametrize("fn", [with_bincount_style_one_hot, with_a_loop_over_positions, with_batch_norm_in_stages,
                                with_softmax_recomputed_and_a_list])
def test_every_correct_form_passes(fn):
    feedback = check(KEY, fn)
    assert feedback.status == CORRECT, feedback.message


# --- wrong, none of them a named mistake ------------------------------------------------------------------
wrong = {
    "dC[idx[b]] += demb[b], example by example": ("dC", lambda s, g: _by_example(s, g)),
    "dC from demb_hat, LayerNorm skipped": ("dC", lambda s, g: _scatter(s, g["demb_hat"])),
    "BatchNorm with only the mean's term": ("dhpre", lambda s, g: _bn_mean_only(s, g)),
    "BatchNorm's means over the features": ("dhpre", lambda s, g: _bn_axis(s, g, -1)),
    "gamma left out of dhpre": ("dhpre", lambda s, g: _bn_no_gamma(s, g)),
    "BatchNorm with Bessel's n − 1": ("dhpre", lambda s, g: _bn_bessel(s, g)),
    "db2 not summed over the batch": ("db2", lambda s, g: g["dlogits"]),
    "dbeta summed over the features": ("dbeta", lambda s, g: g["dhbn"].sum(axis=1)),
    "dgamma from hbn, not ĥ": ("dgamma", lambda s, g: (g["dhbn"] * s.hbn).sum(0)),
    "tanh's slope left out": ("dhbn", lambda s, g: g["dh"]),
    "tanh's slope as 1 − h": ("dhbn", lambda s, g: g["dh"] * (1 - s.h)),
    "dh from the probabilities, not dlogits": ("dh", lambda s, g: s.probs / len(s.y) @ s.W2.T),
    "dlogits as probs − 1 everywhere": ("dlogits", lambda s, g: (s.probs - 1) / len(s.y)),
    "dlogits from the summed loss of the other sign": ("dlogits", lambda s, g: -g["dlogits"]),
    "dW1 from hpre": ("dW1", lambda s, g: s.flat.T @ g["dhbn"]),
    "demb_hat left flat": ("demb_hat", lambda s, g: g["demb_hat"].reshape(len(s.y), -1)),
    "LayerNorm with σ and μ constant": ("demb", lambda s, g: g["demb_hat"] / s.emb_sigma),
    "LayerNorm over every axis but the batch": ("demb", lambda s, g: _ln_axes(s, g, (1, 2))),
}


def _scatter(s, demb):
    dC = np.zeros_like(s.C)
    np.add.at(dC, s.idx, demb)
    return dC


def _by_example(s, g):
    """A loop over the examples: a token repeated across examples adds, one repeated within an example does not."""
    dC = np.zeros_like(s.C)
    for b in range(len(s.idx)):
        dC[s.idx[b]] += g["demb"][b]
    return dC


def _bn(s, g, terms=("mean", "var"), axis=0, gamma=True, count=None):
    x = g["dhbn"] * (s.gamma if gamma else 1)
    n = s.hpre.shape[axis] if count is None else count
    out = x.copy()
    if "mean" in terms:
        out = out - x.sum(axis, keepdims=True) / n
    if "var" in terms:
        out = out - s.hhat * (x * s.hhat).sum(axis, keepdims=True) / n
    return out / s.bn_sigma


def _bn_mean_only(s, g):
    return _bn(s, g, terms=("mean",))


def _bn_axis(s, g, axis):
    return _bn(s, g, axis=axis)


def _bn_no_gamma(s, g):
    return _bn(s, g, gamma=False)


def _bn_bessel(s, g):
    return _bn(s, g, count=s.hpre.shape[0] - 1)


def _ln_axes(s, g, axes):
    x = g["demb_hat"]
    return (x - x.mean(axes, keepdims=True) - s.emb_hat * (x * s.emb_hat).mean(axes, keepdims=True)) / s.emb_sigma


@pytest.mark.parametrize("label", wrong)
def test_wrong_code_is_refused_at_its_tensor_and_not_misnamed(label):
    name, value_of = wrong[label]
    feedback = check(KEY, _replace(name, value_of))
    assert feedback.status == WRONG, (label, feedback.message)
    assert f"the first wrong one is {exercises.NETWORK_SAID[name]}" in feedback.message or (
        name == "dlogits" and "the first gradient backward computes is wrong" in feedback.message), feedback.message
    assert "This looks like" not in feedback.message, (label, feedback.message)


def test_assigning_instead_of_adding_is_the_same_mistake_as_plus_equals():
    """On a fresh zeros array ``dC[idx] = demb`` computes exactly what ``dC[idx] += demb`` does: it is named so."""
    def assigned(s):
        grads = list(reference(s))
        dC = np.zeros_like(s.C)
        dC[s.idx] = grads[-2]
        grads[-1] = dC
        return tuple(grads)
    assert "This looks like dC[idx] += demb, which drops repeated tokens" in check(KEY, assigned).message


def test_only_one_weight_transposed_is_not_called_both():
    feedback = check(KEY, _replace("dW2", lambda s, g: g["dW2"].T))
    assert feedback.status == WRONG and "This looks like" not in feedback.message
    assert "dW2 has shape" in feedback.message or "dW2: wrong values" in feedback.message


def test_changing_a_saved_tensor_in_place_is_refused():
    def scales_probs_in_place(s):
        s.probs[np.arange(len(s.y)), s.y] -= 1
        return reference(s)
    feedback = check(KEY, scales_probs_in_place)
    assert feedback.status == WRONG and "changes one of its inputs in place" in feedback.message


def test_float64_constants_in_float32_are_refused_with_the_dtype():
    def float64_dC(s):
        grads = list(reference(s))
        dC = np.zeros(s.C.shape)  # float64 whatever C is
        np.add.at(dC, s.idx, grads[-2])
        grads[-1] = dC
        return tuple(grads)
    feedback = check(KEY, float64_dC)
    assert feedback.status == WRONG and "dC is float64, but the inputs are float32" in feedback.message


# --- the engine's and PyTorch's backward are not writing it ----------------------------------------------
def test_the_engine_s_own_backward_is_refused():
    def with_the_engine(s):
        C = Tensor(np.asarray(s.C), requires_grad=True)
        (C[s.idx] * np.asarray(s.emb)).sum().backward()
        return reference(s)
    feedback = check(KEY, with_the_engine)
    assert feedback.status == WRONG and "is not its own work" in feedback.message, feedback.message


def test_pytorch_s_autograd_is_refused():
    torch = pytest.importorskip("torch")

    def with_torch(s):
        C = torch.tensor(np.array(s.C), requires_grad=True)
        C[torch.tensor(np.array(s.idx))].sum().backward()
        return reference(s)
    feedback = check(KEY, with_torch)
    assert feedback.status == WRONG and "is not its own work" in feedback.message and "PyTorch" in feedback.message


# --- each named mistake is what its name says ------------------------------------------------------------
def test_each_named_mistake_computes_what_its_name_says():
    mistakes = {m.name: m.code for m in REGISTRY[KEY].mistakes}
    assert len(mistakes) == 6
    s = network_forward(**init_network())
    right = dict(zip(ORDER, reference(s)))

    def of(name):
        return dict(zip(ORDER, mistakes[name](s)))

    B = len(s.y)
    np.testing.assert_allclose(of("no 1/B in the cross-entropy's gradient")["dlogits"], B * right["dlogits"])
    for later in ORDER[1:]:  # every gradient after it is B times too large
        np.testing.assert_allclose(of("no 1/B in the cross-entropy's gradient")[later], B * right[later], atol=1e-12)
    np.testing.assert_allclose(of("tanh's slope taken at its input")["dhbn"], right["dh"] * (1 - s.hbn ** 2))
    # BatchNorm without the batch terms: the gradient with the batch's mean and σ held constant (finite differences)
    constant = _finite_difference_with_batch_statistics_fixed(s, right["dhbn"])
    np.testing.assert_allclose(of("BatchNorm's gradient without the batch terms")["dhpre"], constant, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(of("the weight gradients transposed")["dW2"], right["dW2"].T)
    np.testing.assert_allclose(of("the weight gradients transposed")["dW1"], right["dW1"].T)
    over_batch = of("LayerNorm's backward over the batch axis")["demb"]
    assert not np.allclose(over_batch, right["demb"])
    np.testing.assert_allclose(over_batch, _ln_axes(s, right, 0))
    # dC[idx] += demb keeps one gradient per token: the last position's, where NumPy writes last
    dropped = of("dC[idx] += demb, which drops repeated tokens")["dC"]
    last = np.zeros_like(s.C)
    for b, t in np.ndindex(s.idx.shape):
        last[s.idx[b, t]] = right["demb"][b, t]
    np.testing.assert_allclose(dropped, last)
    assert not np.allclose(dropped, right["dC"])  # the notebook's batch repeats a token


def _finite_difference_with_batch_statistics_fixed(s, dhbn):
    mu, sigma = s.hpre.mean(0, keepdims=True), s.bn_sigma

    def loss(hpre):
        return np.sum(dhbn * (s.gamma * (hpre - mu) / sigma + s.beta))
    found, h = np.zeros_like(s.hpre), 1e-6
    for i in np.ndindex(s.hpre.shape):
        e = np.zeros_like(s.hpre)
        e[i] = h
        found[i] = (loss(s.hpre + e) - loss(s.hpre - e)) / (2 * h)
    return found


def test_the_notebook_s_own_helpers_are_no_way_to_pass():
    """engine_gradients (the engine's backward, in haaw.course.nb05) and the course's reference are refused."""
    def with_the_course_s_helper(s):
        grads = engine_gradients(s.idx, s.y, np.array(s.C), np.array(s.W1), np.array(s.gamma), np.array(s.beta),
                                 np.array(s.W2), np.array(s.b2))
        return tuple(grads[name] for name in ORDER)

    def with_the_reference(s):
        return exercises.network_backward(s)

    for fn in (with_the_course_s_helper, with_the_reference):
        feedback = check(KEY, fn)
        assert feedback.status == WRONG and "is not its own work" in feedback.message, feedback.message
