"""haaw/engine/autograd.py: the one backward pass, at the corners the other engine tests leave, against PyTorch
where it agrees and against the stated rule where haaw differs on purpose."""
import numpy as np
import pytest

from haaw import Tensor


def test_a_leaf_switched_off_after_the_forward_pass_gets_no_gradient_and_its_hooks_are_not_called():
    """x·w, then x.requires_grad_(False): PyTorch's gradients are w.grad = x = [1, 2] and x.grad None, and haaw's
    are too. PyTorch also calls x's hook with the [3, 4] it then drops; haaw computes no gradient for x, so it
    calls no hook (autograd.backward: "left alone"), not even with None."""
    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g))
    y = (x * w).sum()
    x.requires_grad_(False)
    y.backward()
    assert seen == [] and x.grad is None
    np.testing.assert_array_equal(w.grad, [1.0, 2.0])


def test_a_leaf_switched_off_gets_the_same_gradients_elsewhere_as_in_pytorch():
    torch = pytest.importorskip("torch")
    xt, wt = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0], requires_grad=True)
    yt = (xt * wt).sum()
    xt.requires_grad_(False)
    yt.backward()
    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    x.requires_grad_(False)
    y.backward()
    assert x.grad is None and xt.grad is None
    np.testing.assert_array_equal(w.grad, wt.grad.numpy())
