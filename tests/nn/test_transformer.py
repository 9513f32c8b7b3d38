"""Layer norm, GELU, attention and a whole transformer block: finite differences and torch."""
import numpy as np
import pytest

import math

import haaw.nn.functional as F
from haaw import Tensor
from haaw.nn import TransformerBlock
from haaw.nn.utils import clip_grad_norm_
from haaw.tools import gradcheck
from haaw.tools.recorder import GradientRecorder, parameter_grad_norms
from haaw.tools.torch_mirror import block_in_torch

rng = np.random.default_rng(0)


def test_layer_norm_gelu_and_attention_pass_gradcheck():
    x, w, b = rng.standard_normal((3, 6)), rng.standard_normal(6), rng.standard_normal(6)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (6,), w, b), x, w, b).ok
    assert gradcheck(lambda x: F.layer_norm(x, (2, 6)), rng.standard_normal((2, 2, 6))).ok
    assert gradcheck(F.gelu, rng.standard_normal((3, 4))).ok
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v).ok


def numpy_attention(q, k, v, mask=None):
    """softmax(q kᵀ / √d) v, written here from its definition."""
    scores = np.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.einsum("...qk,...kd->...qd", e / e.sum(axis=-1, keepdims=True), v)


def test_forward_values_match_their_definitions_without_torch():
    x = rng.standard_normal((3, 5))
    normed = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(F.layer_norm(Tensor(x), 5).data, normed, rtol=1e-12)
    np.testing.assert_allclose(F.layer_norm(Tensor(x), 5, Tensor(np.full(5, 2.0)), Tensor(np.ones(5))).data,
                               2 * normed + 1, rtol=1e-12)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_allclose(F.gelu(Tensor(x)).data, exact, atol=1e-3)  # the tanh form is within 1e-3
    tanh_form = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(F.gelu(Tensor(x)).data, tanh_form, rtol=1e-12)
    q, k, v = (rng.standard_normal((2, 4, 3)) for _ in range(3))
    causal = np.arange(4)[:, None] >= np.arange(4)[None, :]
    np.testing.assert_allclose(F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v)).data,
                               numpy_attention(q, k, v), rtol=1e-12)
    np.testing.assert_allclose(F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), is_causal=True).data,
                               numpy_attention(q, k, v, causal), rtol=1e-12)
    np.testing.assert_array_equal(F.causal_mask(4), causal)


def test_a_fully_masked_query_gets_zero_output_and_zero_gradient_not_nan():
    q, k, v = (Tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(3))
    mask = np.tril(np.ones((3, 3), dtype=bool))
    mask[1] = False  # query 1 may attend to nothing
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.sum().backward()
    np.testing.assert_array_equal(out.data[1], 0.0)
    for t in (q, k, v):
        assert np.isfinite(t.grad).all()
    np.testing.assert_array_equal(q.grad[1], 0.0)


def test_attention_errors_name_the_shapes():
    q = Tensor(np.ones((3, 4)))
    with pytest.raises(ValueError, match="queries have 4 features but keys have 5"):
        F.scaled_dot_product_attention(q, Tensor(np.ones((3, 5))), Tensor(np.ones((3, 4))))
    with pytest.raises(ValueError, match=r"a mask of shape \(2, 2\) does not fit scores of shape \(3, 3\)"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=np.ones((2, 2), dtype=bool))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_layer_norm_and_gelu_match_torch(torch):
    x, w, b = rng.standard_normal((4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    ours = [Tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    out = F.layer_norm(ours[0], (6,), ours[1], ours[2])
    ref = torch.nn.functional.layer_norm(theirs[0], (6,), theirs[1], theirs[2], eps=1e-5)
    G = rng.standard_normal((4, 6))
    out.backward(G)
    ref.backward(torch.tensor(G))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, t.grad.numpy(), rtol=1e-9, atol=1e-12)
    g = Tensor(x)
    np.testing.assert_allclose(F.gelu(g).data, torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy(),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("masked", ["none", "causal", "is_causal", "causal with an empty row"])
def test_attention_matches_torch_scaled_dot_product_attention(torch, masked):
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    mask = None if masked in ("none", "is_causal") else torch.ones(5, 5, dtype=torch.bool).tril()  # torch's own
    if masked == "causal with an empty row":
        mask[2] = False
    ours = [Tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, attn_mask=None if mask is None else mask.numpy(),
                                         is_causal=masked == "is_causal")
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=mask, is_causal=masked == "is_causal")
    G = rng.standard_normal(out.shape)
    out.backward(G)
    ref.backward(torch.tensor(G))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_a_whole_transformer_block_matches_torch_with_identical_weights(torch):
    block = TransformerBlock(8, heads=2, seed=3)
    x = rng.standard_normal((2, 5, 8))
    xt = Tensor(x, requires_grad=True)
    out = block(xt, mask=F.causal_mask(5))
    G = rng.standard_normal(out.shape)
    out.backward(G)
    x_torch = torch.tensor(x, requires_grad=True)
    ref, P = block_in_torch(block, x_torch, None, torch, is_causal=True)  # PyTorch builds its own causal mask
    ref.backward(torch.tensor(G))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad, x_torch.grad.numpy(), rtol=1e-9, atol=1e-11)
    for p in block.parameters():
        np.testing.assert_allclose(p.grad, P[id(p)].grad.numpy(), rtol=1e-9, atol=1e-11)


def test_the_recorder_reads_the_gradient_norm_at_each_watched_tensor():
    recorder = GradientRecorder()
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    h = recorder.watch("h", x * 2.0)
    y = recorder.watch("y", (h * 3.0).sum())
    y.backward()
    norms = recorder.norms()
    assert norms["y"] == 1.0 and norms["h"] == pytest.approx(3.0 * np.sqrt(6))
    block = TransformerBlock(4, heads=1)
    block(Tensor(np.ones((1, 2, 4)))).sum().backward()
    assert len(parameter_grad_norms(block)) == len(block.parameters())


def test_clip_grad_norm_returns_the_norm_before_and_scales_all_gradients_together():
    a, b = Tensor(np.zeros(2), requires_grad=True), Tensor(np.zeros(1), requires_grad=True)
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])
    assert clip_grad_norm_([a, b], max_norm=1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(np.concatenate([a.grad, b.grad]), [0.6, 0.0, 0.8], rtol=1e-5)
    assert clip_grad_norm_([a, b], max_norm=10.0) == pytest.approx(1.0, rel=1e-5)
    a.grad = np.array([30.0, 40.0])
    assert clip_grad_norm_(iter([a, Tensor(np.zeros(1))]), max_norm=5.0) == pytest.approx(50.0)  # a generator too
    np.testing.assert_allclose(a.grad, [3.0, 4.0], rtol=1e-6)


def test_clip_grad_norm_leaves_a_norm_below_the_limit_alone_and_matches_pytorch_at_the_edges():
    a = Tensor(np.zeros(2), requires_grad=True)
    a.grad = np.array([0.3, 0.4])  # norm 0.5, below the limit: untouched, not scaled up to 1
    before = a.grad
    assert clip_grad_norm_([a], max_norm=1.0) == pytest.approx(0.5)
    assert a.grad is before and list(a.grad) == [0.3, 0.4]
    a.grad = before = np.array([3.0, 4.0])  # exactly at the limit: nothing to clip
    assert clip_grad_norm_([a], max_norm=5.0) == 5.0 and a.grad is before
    one = Tensor(np.zeros((2, 2)), requires_grad=True)
    one.grad = np.array([[3.0, 0.0], [0.0, 4.0]])  # one tensor, not a list: its rows are not parameters
    assert clip_grad_norm_(one, max_norm=1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(one.grad, [[0.6, 0.0], [0.0, 0.8]], rtol=1e-5)
    bad = Tensor(np.zeros(2), requires_grad=True)
    bad.grad = np.array([np.nan, 1.0])
    assert np.isnan(clip_grad_norm_([bad], max_norm=1.0)) and np.all(np.isnan(bad.grad))  # as PyTorch: all nan


def test_clip_grad_norm_matches_torch():
    torch = pytest.importorskip("torch")
    for grads, limit in [([[3.0, 0.0], [4.0]], 1.0), ([[0.3], [0.4]], 1.0), ([[np.nan, 1.0], [2.0]], 1.0)]:
        ours = [Tensor(np.zeros(len(g)), requires_grad=True) for g in grads]
        theirs = [torch.zeros(len(g), dtype=torch.float64, requires_grad=True) for g in grads]
        for o, t, g in zip(ours, theirs, grads):
            o.grad, t.grad = np.array(g), torch.tensor(g, dtype=torch.float64)
        n_ours, n_theirs = clip_grad_norm_(ours, limit), torch.nn.utils.clip_grad_norm_(theirs, limit).item()
        np.testing.assert_allclose(n_ours, n_theirs, rtol=1e-12)
        for o, t in zip(ours, theirs):
            np.testing.assert_allclose(o.grad, t.grad.numpy(), rtol=1e-6)


def test_the_block_diagram_is_condensed_from_the_engine_s_own_graph():
    from haaw.tools.condense import block_diagram

    block = TransformerBlock(8, heads=2, seed=1)
    picture = block_diagram(block, rng.standard_normal((1, 4, 8)), mask=F.causal_mask(4))
    assert repr(picture) == "<computation graph: 7 values, 6 operations>"
    for label in ("LN₁(x)", "Attn", "x + Attn", "LN₂", "FFN", "out"):
        assert label in picture.svg


def test_attention_takes_pytorch_s_arguments_in_pytorch_s_order():
    """The fifth argument is dropout_p, as in PyTorch: a positional 0.1 once turned on the causal mask silently."""
    q = Tensor(np.random.default_rng(0).standard_normal((3, 4)))
    plain = F.scaled_dot_product_attention(q, q, q, None, 0.0).data
    np.testing.assert_array_equal(plain, F.scaled_dot_product_attention(q, q, q).data)
    causal = F.scaled_dot_product_attention(q, q, q, None, 0.0, True).data
    np.testing.assert_array_equal(causal, F.scaled_dot_product_attention(q, q, q, is_causal=True).data)
    with pytest.raises(NotImplementedError, match=r"dropout_p=0.1, but haaw has no dropout"):
        F.scaled_dot_product_attention(q, q, q, None, 0.1)
