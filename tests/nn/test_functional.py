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
