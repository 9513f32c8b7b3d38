"""The Tensor: the shared backward, accumulation, dtypes, and errors a learner can read."""
import numpy as np
import pytest

from haaw import gradcheck
from haaw.autograd import topological_order
from haaw.tensor import Tensor, concatenate, no_grad

rng = np.random.default_rng(0)


def test_y_equals_xw_gives_the_transpose_formulas():
    X = Tensor(rng.standard_normal((5, 3)), requires_grad=True)
    W = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
    Y = X @ W
    G = rng.standard_normal((5, 2))
    Y.backward(G)
    np.testing.assert_allclose(W.grad, X.data.T @ G)
    np.testing.assert_allclose(X.grad, G @ W.data.T)


def test_a_bias_gradient_is_the_sum_over_the_batch():
    x = Tensor(rng.standard_normal((6, 3)))
    b = Tensor(np.zeros(3), requires_grad=True)
    G = rng.standard_normal((6, 3))
    (x + b).backward(G)
    np.testing.assert_allclose(b.grad, G.sum(axis=0))


def test_a_tensor_used_twice_gets_both_contributions_and_leaves_accumulate():
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (a * a + a).sum().backward()
    np.testing.assert_array_equal(a.grad, 2 * a.data + 1)
    (a * 3.0).sum().backward()
    np.testing.assert_array_equal(a.grad, 2 * a.data + 1 + 3)
    a.zero_grad()
    assert a.grad is None


def test_gradients_are_only_computed_for_inputs_that_need_them():
    x = Tensor(rng.standard_normal((4, 3)))  # data: no gradient wanted
    w = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
    (x @ w).sum().backward()
    assert x.grad is None and w.grad.shape == (3, 2)
    assert not (x * 2.0).requires_grad and (x * 2.0)._parents == ()


def test_leaf_gradients_do_not_share_memory_with_each_other():
    a = Tensor(np.ones(3), requires_grad=True)
    b = Tensor(np.ones(3), requires_grad=True)
    (a + b).sum().backward()  # add's backward hands the same array to both
    a.grad *= 0
    np.testing.assert_array_equal(b.grad, np.ones(3))


def test_detach_and_no_grad_cut_the_graph():
    w = Tensor(np.ones(2), requires_grad=True)
    assert not w.detach().requires_grad
    with no_grad():
        y = w * 2.0
    assert not y.requires_grad and y._parents == ()
    assert (w * 2.0).requires_grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_dtypes_are_preserved_forward_and_backward(dtype):
    x = Tensor(rng.standard_normal((3, 4)).astype(dtype), requires_grad=True)
    w = Tensor(rng.standard_normal((4, 2)).astype(dtype), requires_grad=True)
    y = ((x @ w).tanh() * 0.5 + 1).log_softmax(-1).mean()
    assert y.dtype == dtype
    y.backward()
    assert x.grad.dtype == dtype and w.grad.dtype == dtype


def test_batched_matmul_broadcasts_and_unbroadcasts():
    report = gradcheck(lambda a, b: a @ b, rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)))
    assert report.ok, str(report)


def test_topological_order_is_deterministic_for_tensors_too():
    def build():
        x = Tensor(np.ones(2), requires_grad=True, label="x")
        y = x * 2.0
        y.label = "y"
        z = (y + x).sum()
        z.label = "z"
        return z
    assert [n.label for n in topological_order(build())] == [n.label for n in topological_order(build())]


@pytest.mark.parametrize("make, error, message", [
    (lambda: Tensor(np.ones((3, 4))) @ Tensor(np.ones((5, 2))), ValueError,
     r"matmul: \(3, 4\) @ \(5, 2\): inner dimensions 4 and 5 differ"),
    (lambda: Tensor(np.ones(3)) @ Tensor(np.ones((3, 2))), ValueError, "at least 2 dimensions"),
    (lambda: Tensor(np.ones((3, 4))) + Tensor(np.ones(5)), ValueError,
     r"add: shapes \(3, 4\) and \(5,\) cannot be broadcast"),
    (lambda: Tensor(np.ones((2, 3)), requires_grad=True).backward(), RuntimeError,
     r"backward\(\) on a tensor of shape \(2, 3\) needs a gradient"),
    (lambda: Tensor(np.ones(2), requires_grad=True).sum().backward(np.ones(3)), ValueError, "grad has shape"),
    (lambda: Tensor(np.ones(2)).sum().backward(), RuntimeError, "does not require a gradient"),
    (lambda: Tensor(np.array([1, 2]), requires_grad=True), TypeError, "only floating-point tensors"),
    (lambda: Tensor("abc"), TypeError, "Tensor holds numbers"),
    (lambda: Tensor(np.ones((2, 3))).reshape(4, 2), ValueError, r"cannot reshape \(2, 3\)"),
    (lambda: Tensor(np.ones((2, 3)))[5], IndexError, r"indexing a tensor of shape \(2, 3\)"),
    (lambda: concatenate([Tensor(np.ones((2, 3))), Tensor(np.ones((2, 4)))]), ValueError,
     "concatenate along axis 0"),
    (lambda: Tensor(np.ones(2)) ** Tensor(np.ones(2)), TypeError, "exponent must be a plain number"),
    (lambda: Tensor(np.ones(2)) + "a", TypeError, "cannot combine a Tensor with str"),
])
def test_bad_input_gets_a_message_that_names_the_problem(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_repr_is_short_and_deterministic():
    t = Tensor(np.array([1.0, 2.5]), requires_grad=True, label="w")
    assert repr(t) == "Tensor([1. , 2.5], requires_grad=True, label='w')"
    assert "float32" in repr(Tensor(np.ones(2, dtype=np.float32)))
