"""The claims of notebook 05: each figure or causal claim the notebook states, asserted."""
import inspect
import math

import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.course.exercises import check, REGISTRY, yours
from haaw.course.exercises.code import _copies
from haaw.course.exercises import nb05 as _exercises
from haaw.course.nb05 import attention_row, score_variance, softmax_gradient_norm
from haaw.nn import TransformerBlock
from haaw.optim import SGD
from haaw.tools.torch_mirror import block_in_torch
from haaw.engine import guard

# the course's code, as a learner would have typed it (the reference itself is refused by check)
attention_backward = guard.unguarded(_exercises.attention_backward)
softmax_backward = guard.unguarded(_exercises.softmax_backward)


def test_05_a_saturated_softmax_crushes_the_gradient():
    z = np.random.default_rng(0).standard_normal(16)
    norms = [softmax_gradient_norm(scale * z) for scale in (1, 10, 30, 100)]
    assert norms == sorted(norms, reverse=True)
    assert norms[-1] < 1e-10 * norms[0]


def test_05_dividing_by_sqrt_dk_keeps_the_score_variance_near_1():
    for d_k in (4, 64, 1024):
        assert score_variance(d_k, scaled=False) == pytest.approx(d_k, rel=0.1)
        assert score_variance(d_k, scaled=True) == pytest.approx(1.0, abs=0.1)
    unscaled, scaled = attention_row(512, scaled=False), attention_row(512, scaled=True)
    assert unscaled["max weight"] > 0.999 and scaled["max weight"] < 0.5
    assert unscaled["gradient norm"] < 1e-5 * scaled["gradient norm"]
    # "at d_k = 64 ... towards saturation": one key takes most of the weight, the gradient is smaller, not crushed
    unscaled, scaled = attention_row(64, scaled=False), attention_row(64, scaled=True)
    assert f"{unscaled['max weight']:.3f}" == "0.834" and scaled["max weight"] < 0.5
    assert 0.5 * scaled["gradient norm"] < unscaled["gradient norm"] < scaled["gradient norm"]


def test_05_the_rows_of_the_softmax_jacobian_sum_to_0_because_a_shift_changes_nothing():
    z = np.random.default_rng(3).standard_normal(7)
    s = np.exp(z) / np.exp(z).sum()
    shifted = np.exp(z + 3) / np.exp(z + 3).sum()
    assert np.allclose(shifted, s)
    J = np.diag(s) - np.outer(s, s)
    assert np.allclose(J.sum(axis=1), 0, atol=1e-15) and np.allclose(J, J.T)
    # the same along (1, ..., 1) by finite differences: the derivative in that direction is 0
    eps = 1e-6
    ahead = np.exp(z + eps) / np.exp(z + eps).sum()
    assert np.allclose((ahead - s) / eps, 0, atol=1e-9)


def test_05_the_exercise_names_the_notebook_s_own_estimate_of_the_variance():
    estimate = round(score_variance(64, scaled=False, samples=4000), 1)
    assert estimate == 65.4  # the number printed in section 3, which the exercise's feedback names
    feedback = check("05-score-variance", estimate)
    assert not feedback.correct and "estimate from 4000" in feedback.message
    assert check("05-score-variance", 64).correct


def _attention_numpy(S, allowed):
    """softmax over the allowed entries, written independently of haaw: a fully masked row is all 0."""
    out = np.zeros_like(S)
    for i, row in enumerate(S):
        keep = allowed[i]
        if keep.any():
            e = np.exp(row[keep] - row[keep].max())
            out[i, keep] = e / e.sum()
    return out


@pytest.mark.upstream
def test_05_adding_minus_infinity_is_fine_unless_a_whole_row_is_masked():
    rng = np.random.default_rng(5)
    S = rng.standard_normal((4, 4))
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    with np.errstate(invalid="ignore"):
        naive = np.exp(S + np.where(allowed, 0.0, -np.inf))
        naive /= naive.sum(axis=1, keepdims=True)
    assert np.allclose(naive, _attention_numpy(S, allowed))  # every row has a key: adding −∞ is right
    allowed[2] = False
    with np.errstate(invalid="ignore"):
        naive = np.exp(S + np.where(allowed, 0.0, -np.inf))
        naive /= naive.sum(axis=1, keepdims=True)
    assert np.isnan(naive[2]).all() and not np.isnan(naive[[0, 1, 3]]).any()
    assert np.allclose(naive[[0, 1, 3]], _attention_numpy(S, allowed)[[0, 1, 3]])


def test_05_haaw_s_masked_attention_gives_a_fully_masked_row_output_0_and_no_nan_in_the_gradient():
    rng = np.random.default_rng(5)
    rng.standard_normal((4, 4))  # the scores of the claim above: the same draws follow them
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    allowed[2] = False
    X = Tensor(rng.standard_normal((4, 6)), requires_grad=True)
    W = [Tensor(rng.standard_normal((6, 6))) for _ in range(3)]
    out = F.scaled_dot_product_attention(X @ W[0], X @ W[1], X @ W[2], attn_mask=allowed)
    out.backward(rng.standard_normal((4, 6)))
    assert np.array_equal(out.data[2], np.zeros(6)) and not np.isnan(X.grad).any()


def test_05_each_plus_passes_its_gradient_unchanged_and_the_skip_input_also_gets_the_branch_s():
    rng = np.random.default_rng(9)
    block = TransformerBlock(8, heads=2, seed=4)
    x = Tensor(rng.standard_normal((2, 5, 8)), requires_grad=True)
    attended = block.attn(block.ln1(x), mask=F.causal_mask(5))
    h = x + attended
    f = block.ff(block.ln2(h))
    out = h + f
    out.backward(rng.standard_normal(out.shape))
    assert np.array_equal(f.grad, out.grad) and np.array_equal(attended.grad, h.grad)
    # the skip input's gradient is out's plus a real contribution back through LN₂ and the feed-forward
    assert np.linalg.norm(h.grad - out.grad) > 0.01 * np.linalg.norm(out.grad)
    assert not np.isclose(np.linalg.norm(h.grad), np.linalg.norm(out.grad))


def test_05_the_block_runs_on_the_learner_s_two_functions_with_the_engine_s_gradients():
    calls = {"softmax": 0, "attention": 0}

    def mine_softmax(s, G):
        calls["softmax"] += 1
        return softmax_backward(s, G)

    def mine_attention(Q, K, V, mask, G):
        calls["attention"] += 1
        return attention_backward(Q, K, V, mask, G)

    assert check("05-softmax-backward", mine_softmax).correct
    assert check("05-attention-backward", mine_attention).correct
    rng = np.random.default_rng(2)
    block = TransformerBlock(8, heads=2, seed=3)
    x0, g = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 5, 8))
    mask = F.causal_mask(5)
    mask[3] = False  # a query that may look at nothing, inside the block

    def gradients():
        block.zero_grad()
        x = Tensor(x0, requires_grad=True)
        block(x, mask=mask).backward(g)
        return [x.grad] + [p.grad for p in block.parameters()]

    own = gradients()
    calls.update(softmax=0, attention=0)  # the checks above called them too
    with yours(softmax=mine_softmax) as plugged:
        assert plugged.all
        with_softmax = gradients()
    with yours(softmax=mine_softmax, attention=mine_attention) as plugged:
        assert plugged.all
        with_attention = gradients()
    assert calls["softmax"] > 0 and calls["attention"] > 0  # each really ran inside the engine
    for grads in (with_softmax, with_attention):
        assert all(np.allclose(a, b, rtol=1e-10, atol=1e-13) for a, b in zip(grads, own))
        assert not any(np.isnan(a).any() for a in grads)
    torch = pytest.importorskip("torch")

    xt = torch.tensor(x0, requires_grad=True)
    ref, params = block_in_torch(block, xt, mask, torch)
    ref.backward(torch.tensor(g))
    theirs = [xt.grad.numpy()] + [params[id(p)].grad.numpy() for p in block.parameters()]
    assert all(np.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(with_attention, theirs))


def test_05_exercise_1_needs_the_off_diagonal_entries_and_the_named_mistakes_are_what_they_say():
    s, g = np.array([0.5, 0.3, 0.2]), np.array([1.0, 0.0, 0.0])
    J = np.diag(s) - np.outer(s, s)
    dz = J.T @ g
    assert dz[1] == pytest.approx(-0.15) and check("05-softmax-grad", dz[1]).correct
    diagonal_only = np.diag(J) * g  # keeping only ∂s_i/∂z_i: the second logit's gradient would be 0
    assert diagonal_only[1] == 0 and not check("05-softmax-grad", diagonal_only[1]).correct
    # the code exercise's two "diagonal" mistakes: s ⊙ G is diag(s) G, s(1 − s) ⊙ G is diag(J) ⊙ G
    mistakes = {m.name: m.code for m in REGISTRY["05-softmax-backward"].mistakes}
    G = np.array([0.3, -1.2, 2.0])
    by_name = {name: fn(s, G) for name, fn in mistakes.items()}
    assert any(np.allclose(v, np.diag(s) @ G) and "diag(s)" in name for name, v in by_name.items())
    assert any(np.allclose(v, np.diag(J) * G) and "diagonal of the Jacobian" in name for name, v in by_name.items())


def _my_attention_backward(scale_of):
    """Attention's backward written from scratch (sharing nothing with the course's reference), taking
    1/√d_k from ``scale_of(d_k)``: float32 in, float32 out, if that scale is a Python float."""
    def attention_backward(Q, K, V, mask, G):
        c = scale_of(Q.shape[-1])
        S = np.einsum("...qd,...kd->...qk", Q, K) * c
        allowed = np.ones(S.shape, dtype=bool) if mask is None else np.broadcast_to(mask, S.shape)
        P = np.zeros_like(S)
        for index in np.ndindex(S.shape[:-1]):  # one query at a time
            row, ok = S[index], allowed[index]
            if ok.any():
                e = np.exp(row[ok] - row[ok].max())
                P[index + (ok,)] = e / e.sum()
        dV = np.einsum("...qk,...qd->...kd", P, G)
        dP = np.einsum("...qd,...kd->...qk", G, V)
        dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))
        return np.einsum("...qk,...kd->...qd", dS, K) * c, np.einsum("...qk,...qd->...kd", dS, Q) * c, dV
    return attention_backward


def test_05_float32_stays_float32_in_the_reference_and_a_float32_preserving_answer_passes():
    ex = REGISTRY["05-attention-backward"]
    (case,) = [c for c in ex.cases() if c.label == "float32"]
    for fn in [ex.reference] + [m.code for m in ex.mistakes]:  # np.sqrt(d) would make these float64
        assert [o.dtype for o in fn(*_copies(case.args))] == [np.float32] * 3
    for scale_of in (lambda d: d ** -0.5, lambda d: 1 / math.sqrt(d), lambda d: float(1 / np.sqrt(d))):
        mine = _my_attention_backward(scale_of)
        assert [o.dtype for o in mine(*_copies(case.args))] == [np.float32] * 3
        feedback = check("05-attention-backward", mine)
        assert feedback.correct, feedback.message
    # every code exercise of notebooks 03-05: on a case whose float inputs are all float32, the reference's
    # array outputs are float32 too (04-clip-grad-norm's norm is one number, compared in float64)
    for key, exercise in REGISTRY.items():
        if key[:2] not in ("03", "04", "05") or not hasattr(exercise, "reference"):
            continue
        run = exercise.run or (lambda f, *a: f(*_copies(a)))
        for c in exercise.cases():
            inputs = [a for arg in c.args for a in (arg if isinstance(arg, (list, tuple)) else [arg])
                      if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
            if inputs and all(a.dtype == np.float32 for a in inputs):
                outputs = run(exercise.reference, *c.args)
                outputs = outputs if isinstance(outputs, tuple) else (outputs,)
                arrays = [np.asarray(o) for o in outputs if np.ndim(o) > 0]
                assert arrays and all(a.dtype == np.float32 for a in arrays), (key, c.label)


# --- saturation, said precisely (section 2) ---------------------------------------------------------------
def _softmax_np(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_05_the_saturation_curve_is_the_mean_over_200_random_unit_upstream_vectors():
    z = np.random.default_rng(1).standard_normal(16) * 3
    s = _softmax_np(z)
    J = np.diag(s) - np.outer(s, s)
    g = np.random.default_rng(0).standard_normal((200, 16))
    g /= np.linalg.norm(g, axis=1, keepdims=True)
    assert softmax_gradient_norm(z) == pytest.approx(np.mean(np.linalg.norm(g @ J, axis=1)), rel=1e-12)


def test_05_saturation_crushes_a_bounded_upstream_gradient_but_not_cross_entropy_s():
    z = np.array([30.0, 0.0, 0.0, 0.0])
    s = _softmax_np(z)
    assert (f"{s[0]:.4f}", f"{s[1]:.1e}") == ("1.0000", "9.4e-14")  # the weights the core prints
    J = np.diag(s) - np.outer(s, s)

    def log_softmax_at(z_, t):  # log-sum-exp, for finite differences of cross-entropy
        return z_[t] - (z_.max() + np.log(np.sum(np.exp(z_ - z_.max()))))

    for t, ce_size, plain_size in ((1, "1.414", "1.3e-13"), (0, "3.2e-13", "3.2e-13")):
        ce = s - np.eye(4)[t]  # cross-entropy through the softmax: P − T
        plain = J.T @ -np.eye(4)[t]  # L = −s_t: an upstream gradient of length 1
        assert (f"{np.linalg.norm(ce):.3f}" if np.linalg.norm(ce) > 1e-3 else f"{np.linalg.norm(ce):.1e}") == ce_size
        assert f"{np.linalg.norm(plain):.1e}" == plain_size
        h = 1e-5
        fd = np.array([(-log_softmax_at(z + h * e, t) + log_softmax_at(z - h * e, t)) / (2 * h) for e in np.eye(4)])
        assert np.allclose(fd, ce, atol=1e-8)
        # the engine's composite −log(softmax(z))[t], as the notebook computes it, gives the same
        zt = Tensor(z, requires_grad=True)
        (-zt.softmax().log()[t]).backward()
        assert np.allclose(zt.grad, ce, rtol=1e-6, atol=1e-15)
    # the upstream gradient of cross-entropy is −1/s_t: it grows as s_t shrinks
    assert 1 / s[1] > 1e12
    # inside attention the softmax's upstream gradient dP = G Vᵀ does not depend on the weights: scaling the scores
    # up leaves it alone and crushes the gradient of the scores
    rng = np.random.default_rng(3)
    q, k, v, G = rng.standard_normal((4, 8)), rng.standard_normal((4, 8)), rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    sizes = []
    for scale in (1.0, 100.0):
        P = np.apply_along_axis(_softmax_np, -1, scale * q @ k.T)
        dP = G @ v.T
        dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
        sizes.append(np.linalg.norm(dS))
    assert sizes[1] < 1e-6 * sizes[0]


# --- masks (section 5 and Going further) ------------------------------------------------------------------
def test_05_a_key_padding_mask_alone_leaves_every_query_a_key_but_with_a_causal_mask_and_left_padding_it_does_not():
    for pad in ([True, False, False, False], [False, False, True, True], [True, True, False, False]):
        is_pad = np.array(pad)
        key_padding = np.broadcast_to(~is_pad, (4, 4))
        assert key_padding.any(axis=1).all()  # a padding query still sees the real keys
        both = key_padding & np.tril(np.ones((4, 4), dtype=bool))
        empty = np.flatnonzero(~both.any(axis=1))
        first_real = int(np.argmin(is_pad))
        assert list(empty) == list(range(first_real))  # left padding empties the rows before the first real token


@pytest.mark.upstream
def test_05_a_finite_minimum_keeps_masked_weights_at_0_and_turns_a_fully_masked_row_uniform():
    rng = np.random.default_rng(6)
    S, V = rng.standard_normal((4, 4)), rng.standard_normal((4, 3))
    allowed = np.tril(np.ones((4, 4), dtype=bool))
    allowed[2] = False
    added = S + np.where(allowed, 0.0, np.finfo(np.float64).min)
    W = np.apply_along_axis(_softmax_np, -1, added)
    expected = _attention_numpy(S, allowed)
    assert np.array_equal(W[[0, 1, 3]] == 0, ~allowed[[0, 1, 3]])
    assert np.allclose(W[[0, 1, 3]], expected[[0, 1, 3]])
    assert np.allclose(W[2], 0.25) and not np.isnan(W).any()
    assert np.allclose(W[2] @ V, V.mean(axis=0))


# --- the block's other pieces (section 7) ------------------------------------------------------------------
def test_05_splitting_into_heads_is_a_reshape_and_a_swap_whose_backward_moves_the_gradient_back():
    from haaw.nn.modules import SelfAttention

    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((2, 5, 12))
    attn = SelfAttention(12, heads=3, seed=0)
    x = Tensor(x0, requires_grad=True)
    heads = attn.split_heads(x)
    for h in range(3):  # head h holds features h·4 .. h·4 + 3 of every token
        assert np.array_equal(heads.data[:, h], x0[:, :, 4 * h:4 * h + 4])
    G = rng.standard_normal(heads.shape)
    heads.backward(G)
    back = np.zeros_like(x0)
    for h in range(3):
        back[:, :, 4 * h:4 * h + 4] = G[:, h]
    assert np.array_equal(x.grad, back)
    assert not np.array_equal(x0.reshape(2, 3, 5, 4)[:, 0], heads.data[:, 0])  # without the swap, tokens mix


def test_05_layer_norm_s_backward_paths_and_formula():
    rng = np.random.default_rng(8)
    x, G, w, eps = rng.standard_normal((3, 6)), rng.standard_normal((3, 6)), 1 + rng.standard_normal(6), 1e-5
    n = x.shape[-1]
    sigma_of = lambda a: np.sqrt(a.var(axis=-1, keepdims=True) + eps)
    h = 1e-6
    # ∂σ/∂x_j = x̂_j / n, by finite differences
    x_hat = (x - x.mean(-1, keepdims=True)) / sigma_of(x)
    dsigma = np.stack([(sigma_of(x + h * e) - sigma_of(x - h * e))[:, 0] / (2 * h) for e in np.eye(n)], axis=1)
    assert np.allclose(dsigma, x_hat / n, atol=1e-8)
    # the formula against finite differences of L = Σ G ⊙ (x̂ ⊙ w + b)
    loss = lambda a: np.sum(G * ((a - a.mean(-1, keepdims=True)) / sigma_of(a) * w))
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        fd[i] = (loss(x + e) - loss(x - e)) / (2 * h)
    g = G * w
    formula = (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)) / sigma_of(x)
    assert np.allclose(formula, fd, rtol=1e-6, atol=1e-8)
    torch = pytest.importorskip("torch")
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    bt = torch.zeros(6, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.layer_norm(xt, (6,), wt, bt, eps).backward(torch.tensor(G))
    assert np.allclose(formula, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert np.allclose((G * x_hat).sum(0), wt.grad.numpy()) and np.allclose(G.sum(0), bt.grad.numpy())


def _gelu_slope(x):
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * c * (1 + 3 * 0.044715 * x**2)


def test_05_gelu_s_slope_formula_and_its_shape():
    x = np.linspace(-4, 4, 81)
    gelu = lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))  # written here, not haaw's
    h = 1e-6
    assert np.allclose(_gelu_slope(x), (gelu(x + h) - gelu(x - h)) / (2 * h), rtol=1e-7, atol=1e-9)
    xt = Tensor(x, requires_grad=True)
    F.gelu(xt).backward(np.ones_like(x))
    assert np.allclose(xt.grad, _gelu_slope(x), rtol=1e-10)
    slopes = _gelu_slope(x)
    assert (f"{slopes.min():.3f}", f"{x[slopes.argmin()]:.1f}") == ("-0.129", "-1.4")
    assert (f"{slopes.max():.3f}", f"{x[slopes.argmax()]:.1f}") == ("1.129", "1.4")
    fine = np.linspace(-6, 0, 600001)
    negative = fine[_gelu_slope(fine) < 0]
    assert negative.max() == pytest.approx(-0.75, abs=0.01)  # below about −0.75 the slope is negative
    assert _gelu_slope(np.array([0.0]))[0] == 0.5 and abs(_gelu_slope(np.array([8.0]))[0] - 1) < 1e-6
    torch = pytest.importorskip("torch")
    tt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(tt, approximate="tanh").sum().backward()
    assert np.allclose(tt.grad.numpy(), slopes, rtol=1e-10)


def test_05_dropout_s_backward_needs_the_forward_s_mask():
    p, seed = 0.25, 2024
    x, G = np.random.default_rng(6).standard_normal(10), np.random.default_rng(7).standard_normal(10)
    mask = lambda gen: gen.random(10) >= p
    loss = lambda a: np.sum(G * a * mask(np.random.default_rng(seed)) / (1 - p))
    h = 1e-6
    fd = np.array([(loss(x + h * e) - loss(x - h * e)) / (2 * h) for e in np.eye(10)])
    gen = np.random.default_rng(seed)
    first, again = mask(gen), mask(gen)
    assert np.allclose(G * first / (1 - p), fd, rtol=1e-7, atol=1e-9)
    assert not np.allclose(G * again / (1 - p), fd, rtol=1e-7, atol=1e-9)
    ones = np.ones(1_000_000)
    assert f"{np.mean(ones * mask_of(np.random.default_rng(0), ones.shape, p) / (1 - p)):.3f}" == "1.000"


@pytest.mark.upstream
def test_05_pytorch_s_checkpointing_restores_the_rng_state_so_dropout_draws_the_same_mask_again():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint

    def grads(use_checkpoint):
        torch.manual_seed(0)
        a = torch.ones(1000, dtype=torch.float64, requires_grad=True)
        f = lambda t: torch.nn.functional.dropout(t, p=0.5, training=True) * 2
        (checkpoint(f, a, use_reentrant=False) if use_checkpoint else f(a)).sum().backward()
        return a.grad.numpy()
    assert np.array_equal(grads(True), grads(False))


def mask_of(gen, shape, p):
    return gen.random(shape) >= p


# --- the block (section 8) ----------------------------------------------------------------------------------
def test_05_the_block_is_pre_norm_with_a_feed_forward_network_widening_16_to_64():
    block = TransformerBlock(16, heads=4, seed=1)
    assert block.ff.up.weight.shape == (16, 64) and block.ff.down.weight.shape == (64, 16)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 4, 16)))
    h = x + block.attn(block.ln1(x))  # LayerNorm inside the branch; the + adds to x itself
    ff = block.ff.down(F.gelu(block.ff.up(block.ln2(h))))
    assert np.allclose(block(x).data, (h + ff).data)


def test_05_the_block_trains_on_the_learner_s_three_functions_through_the_engine_s_losses():
    layer_norm_backward = guard.unguarded(_exercises.layer_norm_backward)
    from haaw.optim import SGD

    calls = {"layer_norm": 0}

    def mine_ln(*args):
        calls["layer_norm"] += 1
        return layer_norm_backward(*args)

    for key, fn in (("05-softmax-backward", softmax_backward), ("05-attention-backward", attention_backward),
                    ("05-layer-norm-backward", mine_ln)):
        assert check(key, fn).correct
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 6, 16))
    target = np.concatenate([np.zeros((2, 1, 16)), x0[:, :-1]], axis=1)

    def train(steps=60):
        model = TransformerBlock(16, heads=4, seed=1)
        opt = SGD(model.parameters(), lr=0.1)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = ((model(Tensor(x0), mask=F.causal_mask(6)) - Tensor(target)) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    own = train()
    calls["layer_norm"] = 0
    with yours(softmax=softmax_backward, attention=attention_backward, layer_norm=mine_ln) as plugged:
        assert plugged.all
        ours = train()
    assert calls["layer_norm"] == 2 * 60  # both LayerNorms, every step
    assert np.allclose(ours, own, rtol=1e-9, atol=0) and own[-1] < 0.5 * own[0]


def test_05_the_block_s_training_run_fits_one_batch_a_block_that_cannot_look_back_fits_it_about_as_well():
    """Section 8's run checks that gradients train the block, not that attention learned to copy the previous
    token: with a mask that lets each token see only itself, the loss falls about as far."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 16))
    previous = np.concatenate([np.zeros((2, 1, 16)), x[:, :-1]], axis=1)

    def final_loss(mask):
        model = TransformerBlock(16, heads=4, seed=1)
        optimizer = SGD(model.parameters(), lr=0.1)
        for _ in range(60):
            optimizer.zero_grad()
            loss = ((model(Tensor(x), mask=mask) - Tensor(previous)) ** 2).mean()
            loss.backward()
            optimizer.step()
        return loss.item()

    causal, self_only = final_loss(F.causal_mask(6)), final_loss(np.eye(6, dtype=bool))
    assert causal < 0.5 and self_only < 0.5 and 0.5 < self_only / causal < 2


@pytest.mark.upstream
def test_05_in_fp16_the_minimum_plus_a_score_below_about_minus_16_overflows():
    low = np.finfo(np.float16).min
    with np.errstate(over="ignore"):
        assert low + np.float16(-15) == low and np.isneginf(low + np.float16(-17))


@pytest.mark.upstream
def test_05_two_added_minimums_overflow_in_every_format_and_a_row_both_masks_forbid_is_nan():
    """The companion's correction: adding the minimum twice is -inf in every float format, float64 included, so
    it is no bf16 matter; one addition of the minimum to an ordinary score stays finite in bf16, fp32 and fp64."""
    import ml_dtypes

    with np.errstate(over="ignore"):
        for dtype in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64):
            low = np.array(ml_dtypes.finfo(dtype).min, dtype=dtype)
            assert np.isneginf(low + low), dtype
            if dtype is not np.float16:
                assert np.isfinite(low + np.array(-1e4, dtype=dtype)), dtype
    rng = np.random.default_rng(6)
    S = rng.standard_normal((4, 4))
    causal = np.tril(np.ones((4, 4), dtype=bool))
    causal[2] = False
    second = np.ones((4, 4), dtype=bool)
    second[2] = False  # both masks forbid all of row 2
    minimum = np.finfo(np.float64).min
    with np.errstate(over="ignore", invalid="ignore"):
        added = S + np.where(causal, 0.0, minimum) + np.where(second, 0.0, minimum)
        weights = np.exp(added - added.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
    assert np.isneginf(added[2]).all() and np.isnan(weights[2]).all()
    assert np.allclose(weights[[0, 1, 3]], _attention_numpy(S, causal)[[0, 1, 3]])  # forbidden once: weight 0
    combined = S + np.where(causal & second, 0.0, minimum)  # the masks combined first: the minimum once
    assert np.isfinite(combined).all()


# --- 05+, "Backprop by hand, whole" and "BatchNorm couples the batch" ------------------------------------------
from haaw.course import nb05 as _props  # noqa: E402

network_backward = guard.unguarded(_exercises.network_backward)


def test_05_the_notebook_s_forward_is_the_checker_s():
    """The scaffold's forward, shown in 05+, is the one the checker builds the saved tensors with, line for line."""
    nbformat = pytest.importorskip("nbformat")
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "notebooks" / "deeper" / "05_softmax_and_attention_deeper.ipynb"
    cell = next(c.source for c in nbformat.read(path, as_version=4).cells if "def network_forward(" in c.source)
    shown = cell[cell.index("def network_forward("):].split("\n\n\n")[0]
    assert shown.strip() == inspect.getsource(_props.network_forward).strip()


def test_05_dC_plus_equals_keeps_only_the_last_repeat_and_add_at_adds_them():
    idx, g = np.array([2, 0, 2]), np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    plus, added = np.zeros((3, 2)), np.zeros((3, 2))
    plus[idx] += g
    np.add.at(added, idx, g)
    assert plus[2].tolist() == [3.0, 30.0] and added[2].tolist() == [4.0, 40.0]
    C = Tensor(np.zeros((3, 2)), requires_grad=True)
    C[idx].backward(g)
    assert np.array_equal(C.grad, added)  # the engine's getitem backward is a scatter-add


def test_05_the_network_s_batch_repeats_tokens_and_its_loss_is_above_a_uniform_guess():
    net = _props.init_network()
    _, counts = np.unique(net["idx"], return_counts=True)
    assert np.sum(counts > 1) == 5 and len(counts) == 9
    assert f"{_props.network_forward(**net).loss:.3f}" == "2.528" and np.log(10) < 2.528


def test_05_three_oracles_agree_on_the_whole_backward():
    """By hand against the engine (1e-9), finite differences (18 coordinates, 1e-6) and PyTorch (1e-9)."""
    net = _props.init_network()
    s = _props.network_forward(**net)
    by_hand = dict(zip(_props.ORDER, network_backward(s)))
    engine = _props.engine_gradients(**net)
    for name in _props.ORDER:
        assert np.allclose(by_hand[name], engine[name], rtol=1e-9, atol=1e-12), name
    rng, h = np.random.default_rng(3), 1e-6
    for name in ("C", "W1", "gamma", "beta", "W2", "b2"):
        for _ in range(3):
            where = tuple(int(rng.integers(n)) for n in net[name].shape)
            up, down = ({**net, name: net[name].copy()} for _ in range(2))
            up[name][where] += h
            down[name][where] -= h
            finite = (_props.network_forward(**up).loss - _props.network_forward(**down).loss) / (2 * h)
            assert np.isclose(by_hand["d" + name][where], finite, rtol=1e-6, atol=1e-9), (name, where)


@pytest.mark.upstream
def test_05_pytorch_s_batch_norm_in_training_mode_gives_the_same_gradients():
    torch = pytest.importorskip("torch")
    net = _props.init_network()
    x = torch.tensor(net["C"][net["idx"]].reshape(8, -1) @ net["W1"], requires_grad=True)
    g, b = (torch.tensor(net[k], requires_grad=True) for k in ("gamma", "beta"))
    upstream = np.random.default_rng(0).standard_normal((8, 16))
    torch.nn.functional.batch_norm(x, None, None, g, b, training=True, eps=_props.EPS).backward(torch.tensor(upstream))
    ours = Tensor(x.detach().numpy(), requires_grad=True)
    _props.batch_norm(ours, Tensor(net["gamma"]), Tensor(net["beta"])).backward(upstream)
    assert np.allclose(ours.grad, x.grad.numpy(), rtol=1e-9, atol=1e-14)


def test_05_batch_norm_couples_the_batch_and_layer_norm_does_not():
    net = _props.init_network()
    shifts = np.linspace(0, 2, 9)
    under_bn, under_ln = _props.coupling(net, shifts, "batch"), _props.coupling(net, shifts, "layer")
    assert under_ln.max() < 1e-12
    at_1 = under_bn[4]
    assert f"{at_1.min():.0%} {at_1.max():.0%}" == "6% 56%"  # "change by 6% to 56%"
    assert (at_1 > 0.01).all()  # every other example's gradient changes
    assert f"{under_bn[-1].mean():.0%} {under_bn[-1].min():.0%} {under_bn[-1].max():.0%}" == "51% 25% 75%"
    assert under_bn[0].max() == 0 and np.all(np.diff(under_bn.mean(axis=1)) > 0)  # "grows from 0"


def test_05_batch_norm_s_coupling_shrinks_about_as_one_over_the_batch_size():
    sizes = (4, 16, 64, 256)
    by_size = [np.mean([_props.coupling(_props.init_network(batch=B, seed=seed), [1.0]).mean() for seed in range(5)])
               for B in sizes]
    assert by_size == sorted(by_size, reverse=True)
    scaled = [B * c for B, c in zip(sizes, by_size)]
    assert max(scaled) / min(scaled) < 2  # about 1/B: B times the change varies by less than 2× while B grows 64×
    assert [f"{B * c:.1f}" for B, c in zip(sizes, by_size)] == ["2.9", "1.8", "1.8", "1.7"]


def test_05_a_batch_of_one_has_h_hat_0_and_no_gradient_upstream_of_batch_norm():
    net = _props.init_network(batch=1)
    s = _props.network_forward(**net)
    grads = dict(zip(_props.ORDER, network_backward(s)))
    assert np.all(s.hhat == 0)
    for name in ("dhpre", "dW1", "demb_hat", "demb", "dC"):
        assert np.all(grads[name] == 0), name
    engine = _props.engine_gradients(**net)
    assert all(np.all(engine[name] == 0) for name in ("dhpre", "dW1", "demb", "dC"))


def test_05_micro_batches_change_batch_norm_s_gradients_and_not_layer_norm_s():
    """Two halves of 4, each loss a mean and the two halves' gradients averaged, against the batch of 8."""
    net = _props.init_network()
    emb = net["C"][net["idx"]]
    args = (net["W1"], net["gamma"], net["beta"], net["W2"], net["b2"])
    for norm, same in (("batch", False), ("layer", True)):
        whole = _props.input_gradient(emb, net["y"], *args, norm=norm)
        halves = np.concatenate([_props.input_gradient(emb[i:i + 4], net["y"][i:i + 4], *args, norm=norm) / 2
                                 for i in (0, 4)])
        assert np.allclose(whole, halves, rtol=1e-10, atol=1e-14) == same, norm
