"""The claims of notebook 05: each figure or causal claim the notebook states, asserted."""
import math

import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.course.exercises import check, REGISTRY, yours
from haaw.course.exercises.code import _copies
from haaw.course.exercises.nb05 import attention_backward, softmax_backward
from haaw.course.nb05 import attention_row, score_variance, softmax_gradient_norm
from haaw.nn import TransformerBlock
from haaw.tools.torch_mirror import block_in_torch


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
    # haaw's masked attention: row 2 gives output 0 and no NaN anywhere in the gradient

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
