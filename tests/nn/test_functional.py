import numpy as np
import pytest

import haaw.nn.functional as F
from haaw.engine.tensor import Tensor


def test_softmax_is_stable_for_huge_logits():
    s = F.softmax(Tensor(np.array([1000.0, 1000.0, -1000.0])))
    np.testing.assert_allclose(s.data, [0.5, 0.5, 0.0])
    assert np.isfinite(F.log_softmax(Tensor(np.array([1000.0, -1000.0]))).data).all()


def test_cross_entropy_of_a_uniform_guess_is_log_of_the_class_count():
    loss = F.cross_entropy(Tensor(np.zeros((4, 10))), np.array([0, 3, 9, 2]))
    assert loss.item() == pytest.approx(np.log(10))


def test_the_mask_removes_padding_before_the_mean():
    logits = Tensor(np.random.default_rng(0).standard_normal((2, 5, 3)), requires_grad=True)
    targets = np.array([[0, 1, 2, 0, 0], [2, 2, 0, 0, 0]])
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    masked = F.cross_entropy(logits, targets, mask=mask)
    real = [F.cross_entropy(logits[0, :3], targets[0, :3], reduction="sum"),
            F.cross_entropy(logits[1, :2], targets[1, :2], reduction="sum")]
    assert masked.item() == pytest.approx((real[0].item() + real[1].item()) / 5)
    masked.backward()
    assert np.all(logits.grad[0, 3:] == 0) and np.all(logits.grad[1, 2:] == 0)


@pytest.mark.parametrize("targets, mask, reduction, message", [
    (np.array([0.0, 1.0]), None, "mean", "integer class ids"),
    (np.array([0, 1, 2]), None, "mean", r"targets of shape \(3,\) do not match logits of shape \(2, 3\)"),
    (np.array([0, 3]), None, "mean", r"must lie in \[0, 2\]"),
    (np.array([0, 1]), None, "average", "reduction must be"),
    (np.array([0, 1]), np.array([1, 0, 1]), "mean", "mask of shape"),
    (np.array([0, 1]), np.array([0, 0]), "mean", "removes every entry"),
])
def test_cross_entropy_errors_name_the_problem(targets, mask, reduction, message):
    with pytest.raises((TypeError, ValueError), match=message):
        F.cross_entropy(Tensor(np.zeros((2, 3))), targets, mask=mask, reduction=reduction)
