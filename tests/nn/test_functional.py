"""The functions of haaw.nn.functional, with PyTorch's signatures."""
import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw.engine import Tensor


def test_softmax_is_stable_for_huge_logits():
    s = F.softmax(Tensor(np.array([1000.0, 1000.0, -1000.0])))
    np.testing.assert_allclose(s.data, [0.5, 0.5, 0.0])
    assert np.isfinite(F.log_softmax(Tensor(np.array([1000.0, -1000.0]))).data).all()


def test_cross_entropy_is_finite_and_exact_for_huge_logits():
    loss = F.cross_entropy(Tensor(np.array([[1000.0, 1000.0 + np.log(3.0)]])), np.array([1]))
    assert loss.item() == pytest.approx(np.log(4 / 3), rel=1e-9)  # −log(3 / (1 + 3))


def test_cross_entropy_of_a_uniform_guess_is_log_of_the_class_count():
    loss = F.cross_entropy(Tensor(np.zeros((4, 10))), np.array([0, 3, 9, 2]))
    assert loss.item() == pytest.approx(np.log(10))


@pytest.mark.parametrize("how", ["mask", "ignore_index"])
def test_padding_is_removed_before_the_mean_by_a_mask_or_by_ignore_index(how):
    logits = Tensor(np.random.default_rng(0).standard_normal((2, 3, 5)), requires_grad=True)  # (N, C, positions)
    targets = np.array([[0, 1, 2, 0, 0], [2, 2, 0, 0, 0]])
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    if how == "mask":
        loss = F.cross_entropy(logits, targets, mask=mask)
    else:
        loss = F.cross_entropy(logits, np.where(mask == 1, targets, -100))
    real = [F.cross_entropy(logits[0, :, :3].T, targets[0, :3], reduction="sum"),
            F.cross_entropy(logits[1, :, :2].T, targets[1, :2], reduction="sum")]
    assert loss.item() == pytest.approx((real[0].item() + real[1].item()) / 5)
    loss.backward()
    assert np.all(logits.grad[0, :, 3:] == 0) and np.all(logits.grad[1, :, 2:] == 0)


def test_class_weights_weigh_each_entry_and_the_mean_divides_by_their_sum():
    logits = np.random.default_rng(1).standard_normal((4, 3))
    targets = np.array([0, 2, 2, 1])
    weight = np.array([1.0, 2.0, 0.5])
    per_entry = F.cross_entropy(Tensor(logits), targets, reduction="none").data
    expected = np.sum(weight[targets] * per_entry) / np.sum(weight[targets])
    assert F.cross_entropy(Tensor(logits), targets, weight=weight).item() == pytest.approx(expected, rel=1e-12)


def test_an_unbatched_input_of_shape_classes_takes_a_0d_target():
    assert F.cross_entropy(Tensor(np.zeros(4)), np.array(2)).item() == pytest.approx(np.log(4))


@pytest.mark.parametrize("targets, mask, reduction, message", [
    (np.array([0.0, 1.0]), None, "mean", "integer class ids"),
    (np.array([0, 1, 2]), None, "mean", r"target of shape \(3,\) does not fit input of shape \(2, 3\).*axis 1"),
    (np.array([0, 3]), None, "mean", r"target 3 is not a class id: they must lie in \[0, 2\]"),
    (np.array([0, 1]), None, "average", "reduction must be"),
    (np.array([0, 1]), np.array([1, 0, 1]), "mean", "mask of shape"),
    (np.array([0, 1]), np.array([0, 0]), "mean", "every entry is ignored or masked"),
    (np.array([-100, -100]), None, "mean", "every entry is ignored or masked"),
])
def test_cross_entropy_errors_name_the_problem(targets, mask, reduction, message):
    with pytest.raises((TypeError, ValueError), match=message):
        F.cross_entropy(Tensor(np.zeros((2, 3))), targets, mask=mask, reduction=reduction)


def test_layer_norm_names_a_shape_that_does_not_fit():
    with pytest.raises(ValueError, match=r"normalized_shape \(4,\) must be the last axes of the input"):
        F.layer_norm(Tensor(np.ones((2, 3))), 4)


def test_gelu_only_has_the_tanh_form_and_says_so():
    with pytest.raises(ValueError, match="approximate='tanh' only"):
        F.gelu(Tensor(np.ones(2)), approximate="none")


@pytest.mark.parametrize("input_shape, target, expected", [
    ((3,), np.array([1]), r"should have shape \(\)"),  # one row of logits: a 0-d target
    ((2, 3, 5), np.zeros((2, 3), dtype=int), r"should have shape \(2, 5\)"),  # classes on axis 1
    ((4, 3, 5, 6), np.zeros((4, 5), dtype=int), r"should have shape \(4, 5, 6\)"),
])
def test_cross_entropy_says_which_target_shape_would_fit(input_shape, target, expected):
    with pytest.raises(ValueError, match=expected):
        F.cross_entropy(Tensor(np.zeros(input_shape)), target)


@pytest.mark.parametrize("x, w, b", [
    ((2, 3), (3, 4), (5,)),  # only the bias is wrong
    ((2, 3), (3, 4), (1, 4)),
    ((2, 3), (2, 4), (4,)),  # only the inner dimensions differ
    ((2, 3), (3, 4, 1), (4, 1)),  # only the weight has three axes
])
def test_linear_refuses_each_mismatch_on_its_own(x, w, b):
    with pytest.raises(ValueError, match="the input's last axis must match the weight's first"):
        F.linear(Tensor(np.ones(x)), Tensor(np.ones(w)), Tensor(np.ones(b)))


def test_cross_entropy_with_one_class_and_an_ignored_entry():
    # the ignored entry's target is replaced by a valid class id before indexing: with one class, only 0 is
    loss = F.cross_entropy(Tensor(np.array([[2.0], [5.0]])), np.array([0, -100]), reduction="none")
    np.testing.assert_array_equal(loss.data, [0.0, 0.0])


def test_a_floating_point_attention_mask_is_added_to_the_scores_as_in_pytorch():
    rng = np.random.default_rng(3)
    q, k, v = (Tensor(rng.standard_normal((3, 4)), requires_grad=True) for _ in range(3))
    additive = np.where(np.tril(np.ones((3, 3))) > 0, 0.0, -np.inf)  # 0 keeps, -inf removes: causal
    as_floats = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    as_bools = F.scaled_dot_product_attention(q, k, v, attn_mask=additive == 0)
    np.testing.assert_allclose(as_floats.data, as_bools.data, rtol=1e-12)  # not inverted
    bias = rng.standard_normal((3, 3))  # any real numbers: a bias on the scores
    biased = F.scaled_dot_product_attention(q, k, v, attn_mask=bias).data
    scores = q.data @ k.data.T / 2.0 + bias
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(biased, (weights / weights.sum(-1, keepdims=True)) @ v.data, rtol=1e-12)
    with pytest.raises(TypeError, match="attn_mask must be boolean .* or floating-point"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((3, 3), dtype=np.int64))


def test_dropout_zeroes_a_fraction_p_keeps_the_mean_and_replays_its_mask_in_a_checkpoint():
    """dropout was missing. Its mask comes from haaw's generator, which a checkpoint's recomputation replays: the
    gradient through a checkpointed dropout is the forward pass's mask, scaled, not a fresh one."""
    haaw.manual_seed(0)
    x = Tensor(np.ones(20_000), requires_grad=True)
    y = F.dropout(x, p=0.25)
    zeroed = float((y.data == 0).mean())
    assert abs(zeroed - 0.25) < 0.02 and abs(float(y.data.mean()) - 1.0) < 0.03
    np.testing.assert_array_equal(np.unique(y.data), [0.0, 1 / 0.75])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, y.data)  # the slope is the scaled mask
    assert F.dropout(x, p=0.5, training=False) is x and F.dropout(x, p=0.0) is x
    assert not F.dropout(x, p=1.0).data.any()
    with pytest.raises(ValueError, match="probability"):
        F.dropout(x, p=1.5)
    z = Tensor(np.arange(1.0, 9.0), requires_grad=True)
    out = haaw.checkpoint(lambda t: F.dropout(t, p=0.5) * t, z)  # d/dt (m · t · t) = 2 m t
    out.sum().backward()
    np.testing.assert_allclose(z.grad, 2 * out.data / z.data)


# The tests below were written against the survivors of a mutation run of haaw/nn/functional.py alone
# (docs/mutation-survivors.md): each asserts what a learner sees, against hand values, whole messages written
# out, or PyTorch.

def _advice(what, name, given):
    return (f"{what}(): argument '{name}' must be a Tensor, not {given} (PyTorch refuses it too). "
            f"Write haaw.tensor({name}) for a copy, or haaw.from_numpy({name}) to share the array")


_T = Tensor(np.ones((2, 3)))


@pytest.mark.parametrize("call, message", [
    (lambda: F.linear(np.ones((2, 3)), Tensor(np.ones((3, 2)))), _advice("linear", "input", "a NumPy array")),
    (lambda: F.linear(_T, [[1.0, 2.0]] * 3), _advice("linear", "weight", "a list")),
    (lambda: F.linear(_T, Tensor(np.ones((3, 2))), np.ones(2)), _advice("linear", "bias", "a NumPy array")),
    (lambda: F.linear(_T, Tensor(np.ones((3, 2))), (1.0, 2.0)), _advice("linear", "bias", "a tuple")),
    (lambda: F.layer_norm(np.ones((2, 3)), 3), _advice("layer_norm", "input", "a NumPy array")),
    (lambda: F.scaled_dot_product_attention(np.ones((2, 3)), _T, _T),
     _advice("scaled_dot_product_attention", "query", "a NumPy array")),
    (lambda: F.scaled_dot_product_attention(_T, [[1.0] * 3] * 2, _T),
     _advice("scaled_dot_product_attention", "key", "a list")),
    (lambda: F.scaled_dot_product_attention(_T, _T, np.ones((2, 3))),
     _advice("scaled_dot_product_attention", "value", "a NumPy array")),
])
def test_an_array_or_list_where_a_tensor_is_needed_is_refused_by_argument_name_in_full(call, message):
    with pytest.raises(TypeError) as error:
        call()
    assert str(error.value) == message


def test_softmax_and_log_softmax_work_along_the_dim_they_are_given():
    x = np.array([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    down_columns = np.exp(x) / np.exp(x).sum(axis=0, keepdims=True)
    np.testing.assert_allclose(F.softmax(Tensor(x), dim=0).data, down_columns, rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(Tensor(x), dim=0).data, np.log(down_columns), rtol=1e-12)


def test_cross_entropy_refusals_in_full():
    cases = [
        (lambda: F.cross_entropy(np.zeros((2, 3)), np.array([0, 1])), TypeError,
         "cross_entropy: input must be a Tensor of logits, got ndarray"),
        (lambda: F.cross_entropy(Tensor(np.zeros((2, 3))), np.array([0, 1, 2])), ValueError,
         "cross_entropy: target of shape (3,) does not fit input of shape (2, 3): the classes are on axis 1 (as in "
         "PyTorch), so target should have shape (2,). For logits of shape (B, T, C), pass input.reshape(-1, C) and "
         "target.reshape(-1)."),
        (lambda: F.cross_entropy(Tensor(np.zeros((2, 3))), np.array([0, 1]), weight=np.ones(2)), ValueError,
         "cross_entropy: weight must have one entry per class, shape (3,), got (2,)"),
        (lambda: F.cross_entropy(Tensor(np.zeros((2, 3))), np.array([0, 1]), mask=np.array([0, 0])), ValueError,
         "cross_entropy: every entry is ignored or masked, so there is nothing to average (PyTorch returns nan "
         "here)"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind) as error:
            call()
        assert str(error.value) == message


def test_cross_entropy_takes_targets_weights_and_masks_as_python_numbers_and_lists():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    rows = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # log-probabilities by hand
    assert F.cross_entropy(Tensor(logits[0]), 2).item() == pytest.approx(-rows[0, 2], rel=1e-12)
    assert F.cross_entropy(Tensor(logits), [1, 2]).item() == pytest.approx(-(rows[0, 1] + rows[1, 2]) / 2, rel=1e-12)
    weighted = F.cross_entropy(Tensor(logits), np.array([1, 2]), weight=[1.0, 3.0, 1.0]).item()
    assert weighted == pytest.approx(-(3.0 * rows[0, 1] + rows[1, 2]) / 4.0, rel=1e-12)
    assert F.cross_entropy(Tensor(logits), np.array([1, 2]), mask=[0, 1]).item() == pytest.approx(-rows[1, 2], rel=1e-12)


def test_cross_entropy_with_equal_class_weights_is_the_plain_mean_as_in_pytorch():
    """Weights of 2 for every class double each loss and the sum of weights alike: the mean is unchanged, the sum
    doubled. PyTorch: F.cross_entropy(x, y, weight=torch.full((3,), 2.0)) equals F.cross_entropy(x, y)."""
    logits = Tensor(np.random.default_rng(4).standard_normal((5, 3)))
    targets = np.array([0, 2, 1, 1, 0])
    plain = F.cross_entropy(logits, targets)
    doubled = np.full(3, 2.0)
    assert F.cross_entropy(logits, targets, weight=doubled).item() == pytest.approx(plain.item(), rel=1e-12)
    summed = F.cross_entropy(logits, targets, weight=doubled, reduction="sum").item()
    assert summed == pytest.approx(2 * 5 * plain.item(), rel=1e-12)


def test_a_weighted_float32_cross_entropy_stays_float32_as_in_pytorch():
    logits = Tensor(np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32))
    for weight, mask in ((np.array([1.0, 2.0, 0.5]), None), (None, np.array([1, 1, 0, 1]))):
        assert F.cross_entropy(logits, np.array([0, 1, 2, 1]), weight=weight, mask=mask).dtype == np.float32


def test_dropout_drops_half_by_default_and_keeps_float32():
    haaw.manual_seed(1)
    out = F.dropout(Tensor(np.ones(10_000, dtype=np.float32)))
    assert out.dtype == np.float32
    assert set(np.unique(out.data)) == {0.0, 2.0} and abs((out.data == 0).mean() - 0.5) < 0.03


@pytest.mark.parametrize("name, shape", [("weight", (2,)), ("bias", (4,))])
def test_layer_norm_names_a_weight_or_bias_of_the_wrong_shape_given_as_a_list_or_a_tensor(name, shape):
    for given in ([1.0] * shape[0], Tensor(np.ones(shape))):
        with pytest.raises(ValueError) as error:
            F.layer_norm(Tensor(np.ones((2, 3))), 3, **{name: given})
        assert str(error.value) == (f"layer_norm: the {name} has shape {shape}, but normalized_shape is (3,): "
                                    f"one {name} per normalised entry")


@pytest.mark.parametrize("as_tensors", [True, False])
def test_layer_norm_in_float16_uses_its_weight_bias_and_eps_as_pytorch_does(as_tensors):
    """PyTorch computes a float16 LayerNorm in float32 and rounds the result: so must haaw, with every argument."""
    x = np.array([[1.0, 2.0, 4.0, 8.0], [0.5, -0.5, 0.25, 0.0]], dtype=np.float16)
    w, b = np.array([1.0, 2.0, -3.0, 0.5]), np.array([0.0, 1.0, 0.0, -1.0])
    centred = x.astype(np.float64) - x.astype(np.float64).mean(axis=1, keepdims=True)
    for eps in (1e-5, 0.5):
        normed = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + eps)
        weight, bias = (Tensor(w.astype(np.float16)), Tensor(b.astype(np.float16))) if as_tensors else (w, b)
        out = F.layer_norm(Tensor(x), 4, weight, bias, eps=eps)
        assert out.dtype == np.float16
        np.testing.assert_allclose(out.data.astype(np.float64), normed * w + b, rtol=2e-3, atol=2e-3)
        bare = F.layer_norm(Tensor(x), 4, eps=eps)
        np.testing.assert_allclose(bare.data.astype(np.float64), normed, rtol=2e-3, atol=2e-3)


def test_a_wrong_number_of_gradients_from_your_layer_norm_backward_is_refused_in_full():
    def four(x, weight, G, eps):
        return np.zeros_like(x), np.zeros(x.shape[-1]), np.zeros(x.shape[-1]), np.zeros(1)

    x = Tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    with haaw.use(layer_norm=four), pytest.raises(ValueError) as error:
        F.layer_norm(x, 3).sum().backward()
    assert str(error.value) == ("_LayerNormWithYourBackward.backward returned 4 gradient(s) for the 6 argument(s) of "
                                "forward: return one per argument (None where there is none)")


def test_your_layer_norm_backward_keeps_float32_without_a_weight():
    def zero(x, weight, G, eps):
        return np.zeros_like(x), np.zeros_like(weight), np.zeros_like(weight)

    with haaw.use(layer_norm=zero):
        assert F.layer_norm(Tensor(np.ones((2, 3), dtype=np.float32)), 3).dtype == np.float32


def _attention(q, k, v, scale, mask=None):
    """softmax(q kᵀ · scale) v by hand, a False in the mask removing a key."""
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


def test_attention_uses_the_scale_it_is_given_and_returns_its_weights_when_asked():
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))
    out = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), scale=0.1)
    np.testing.assert_allclose(out.data, _attention(q, k, v, 0.1), rtol=1e-12)
    out, weights = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), return_weights=True)
    np.testing.assert_allclose(out.data, _attention(q, k, v, 0.5), rtol=1e-12)
    np.testing.assert_allclose(weights.data, _attention(q, k, np.eye(3), 0.5), rtol=1e-12)  # weights @ I


def test_attention_with_is_causal_also_applies_the_mask_it_is_given():
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((4, 2)) for _ in range(3))
    mine = np.array([[True, True, False, True]] * 4)  # key 2 is padding
    both = mine & np.tril(np.ones((4, 4), dtype=bool))
    out = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), attn_mask=mine, is_causal=True)
    np.testing.assert_allclose(out.data, _attention(q, k, v, 2**-0.5, both), rtol=1e-12)


@pytest.mark.parametrize("q_shape, kv_shape", [((2, 3, 4), (5, 4)), ((3, 4), (2, 5, 4))])
def test_a_mask_fits_scores_broadcast_over_the_batch_of_either_side(q_shape, kv_shape):
    rng = np.random.default_rng(8)
    q, k, v = rng.standard_normal(q_shape), rng.standard_normal(kv_shape), rng.standard_normal(kv_shape)
    mask = rng.random((2, 3, 5)) < 0.7
    mask[..., 0] = True  # every query sees a key
    out = F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), attn_mask=mask)
    np.testing.assert_allclose(out.data, _attention(q, k, v, 0.5, mask), rtol=1e-12)


def test_a_learned_additive_mask_receives_its_gradient_as_in_pytorch():
    """A floating-point mask that requires grad (a learned bias on the scores) is part of the graph in PyTorch."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((3, 4)) for _ in range(3))
    bias = rng.standard_normal((3, 3))
    ours = Tensor(bias, requires_grad=True)
    F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), attn_mask=ours).sum().backward()
    theirs = torch.tensor(bias, requires_grad=True)
    torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a)[None] for a in (q, k, v)),
                                                     attn_mask=theirs).sum().backward()
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_attention_refusals_in_full():
    q = Tensor(np.ones((2, 3, 4)))
    cases = [
        (lambda: F.scaled_dot_product_attention(q, q, q, None, 0.1), NotImplementedError,
         "attention: dropout_p=0.1, but haaw has no dropout; PyTorch would drop each attention weight with that "
         "probability while training. Pass dropout_p=0.0 (the fifth argument is dropout_p, as in PyTorch; "
         "is_causal comes after it)"),
        (lambda: F.scaled_dot_product_attention(q, Tensor(np.ones((2, 3, 5))), q), ValueError,
         "attention: queries have 4 features but keys have 5"),
        (lambda: F.scaled_dot_product_attention(q, q, Tensor(np.ones((2, 5, 4)))), ValueError,
         "attention: 3 keys but 5 values"),
        (lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=np.zeros((2, 2))), ValueError,
         "attention: a mask of shape (2, 2) does not fit scores of shape (2, 3, 3) (queries × keys)"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind) as error:
            call()
        assert str(error.value) == message


def test_a_mask_that_requires_grad_is_refused_as_class_weights_are():
    """haaw's mask (1 counts, 0 is padding) is a constant like the class weights: one that requires grad was used as
    a constant and its gradient left None, silently."""
    logits, targets = Tensor(np.zeros((2, 3)), requires_grad=True), np.array([0, 1])
    with pytest.raises(RuntimeError) as error:
        F.cross_entropy(logits, targets, mask=Tensor(np.array([1.0, 0.0]), requires_grad=True))
    assert str(error.value) == ("cross_entropy: the mask requires grad, but no gradient flows back to it (it only says "
                                "which entries count). Pass mask.detach()")
    detached = F.cross_entropy(logits, targets, mask=Tensor(np.array([1.0, 0.0]), requires_grad=True).detach())
    assert detached.item() == pytest.approx(np.log(3), rel=1e-12)  # the one entry that counts


def test_class_weights_that_require_grad_are_refused_as_pytorch_refuses_them():
    """No gradient flows back to cross_entropy's class weights; PyTorch refuses such a weight in the forward
    ("not differentiable with respect to argument 'weight'"). haaw used to take it and leave its grad None."""
    logits, targets = Tensor(np.zeros((2, 3)), requires_grad=True), np.array([0, 1])
    with pytest.raises(RuntimeError) as error:
        F.cross_entropy(logits, targets, weight=Tensor(np.ones(3), requires_grad=True))
    assert str(error.value) == ("cross_entropy: the class weights require grad, but no gradient flows back to them "
                                "(PyTorch refuses them too). Pass weight.detach()")
    detached = F.cross_entropy(logits, targets, weight=Tensor(np.ones(3), requires_grad=True).detach())
    assert detached.item() == pytest.approx(np.log(3), rel=1e-12)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        torch.nn.functional.cross_entropy(torch.zeros(2, 3, requires_grad=True), torch.tensor([0, 1]),
                                          weight=torch.ones(3, requires_grad=True))
