"""What a learner coming from PyTorch types, and what haaw answers: PyTorch's result, or a clear refusal.
(haaw.nn's habits: tests/nn/test_nn_habits.py.)"""
import math

import numpy as np
import pytest

import haaw
from haaw import Tensor, no_grad
from haaw.optim import SGD, Adam

rng = np.random.default_rng(7)


def test_dim_of_an_empty_tuple_reduces_everything_and_a_float_dim_is_refused():
    x = Tensor(rng.standard_normal((2, 3)))
    assert x.sum(dim=()).item() == pytest.approx(x.data.sum()) and x.mean(dim=()).shape == ()
    with pytest.raises(TypeError, match="sum: dim must be an integer or a tuple of integers, got float 1.0"):
        x.sum(dim=1.0)
    with pytest.raises(TypeError, match=r"softmax: dim must be one integer .* got \(0, 1\)"):
        x.softmax(dim=(0, 1))


def test_cat_of_one_tensor_is_refused_instead_of_joining_its_rows():
    with pytest.raises(TypeError, match="cat: takes a list or tuple of tensors"):
        haaw.cat(Tensor(np.ones((2, 3))))


def test_the_truth_of_a_one_entry_tensor_is_its_value_and_of_a_bigger_one_is_refused():
    assert bool(Tensor([0.0])) is False and bool(Tensor(2.0)) is True
    with pytest.raises(RuntimeError, match=r"truth value of a tensor of shape \(2,\) is ambiguous"):
        bool(Tensor([1.0, 2.0]))


def test_no_grad_decorates_with_or_without_parentheses_and_nests():
    @no_grad
    def bare(x):
        return x * 2

    @no_grad()
    def called(x):
        return bare(x) + x

    x = Tensor([1.0], requires_grad=True)
    assert not bare(x).requires_grad and not called(x).requires_grad and (x * 2).requires_grad
    with no_grad():
        with no_grad():
            pass
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad


def test_backward_takes_retain_graph_and_refuses_create_graph():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()  # haaw keeps the graph anyway: a second pass adds up
    np.testing.assert_array_equal(x.grad, [4.0, 8.0])
    with pytest.raises(NotImplementedError, match="create_graph=True.*no gradients of gradients"):
        y.backward(create_graph=True)


def test_a_leaf_switched_off_after_the_forward_pass_receives_nothing():
    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    x.requires_grad_(False)
    y.backward()
    assert x.grad is None and list(w.grad) == [1.0, 2.0]


def test_a_number_to_the_power_of_a_tensor():
    x = Tensor([0.5, 2.0], requires_grad=True)
    y = 2 ** x
    y.sum().backward()
    np.testing.assert_allclose(y.data, [math.sqrt(2), 4.0], rtol=1e-15)
    np.testing.assert_allclose(x.grad, y.data * math.log(2), rtol=1e-15)
    assert list((3 ** Tensor([0, 2])).data) == [1, 9]
    with pytest.raises(TypeError, match="positive number as the base"):
        (-2) ** x


def test_empty_tensors_reduce_to_empty_or_nan_as_in_pytorch():
    assert Tensor(np.zeros((0, 3))).mean(dim=1).shape == (0,)
    assert np.all(np.isnan(Tensor(np.zeros((3, 0))).mean(dim=1).data))
    assert Tensor(np.zeros((2, 0))).softmax(-1).shape == (2, 0)
    x = Tensor(np.zeros((0, 3)), requires_grad=True)
    x.softmax(-1).sum().backward()
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize("make, message", [
    (lambda p: SGD(p, lr=-0.1), "SGD: lr = -0.1 is not valid"),
    (lambda p: SGD(p, lr=0.1, momentum=1.5), "SGD: momentum = 1.5 is not valid"),
    (lambda p: Adam(p, lr=-1e-3), "Adam: lr = -0.001 is not valid"),
    (lambda p: Adam(p, betas=(0.9, 1.2)), r"Adam: beta2 = 1.2 is not valid; it must be a number from 0 up to"),
    (lambda p: Adam(p, eps=float("nan")), "Adam: eps = nan is not valid"),
])
def test_optimizers_refuse_the_settings_pytorch_refuses(make, message):
    with pytest.raises(ValueError, match=message):
        make([Tensor(np.ones(2), requires_grad=True)])


def test_an_optimizer_given_one_tensor_says_to_pass_a_list():
    with pytest.raises(TypeError, match=r"params must be a list of tensors .* write \[w\]"):
        SGD(Tensor(np.ones((2, 2)), requires_grad=True), lr=0.1)


def test_these_habits_match_torch():
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((2, 3))
    assert Tensor(data).sum(dim=()).item() == pytest.approx(torch.tensor(data).sum(dim=()).item(), rel=1e-15)
    assert bool(Tensor([0.0])) == bool(torch.tensor([0.0]))
    np.testing.assert_allclose((2 ** Tensor(data)).data, (2 ** torch.tensor(data)).numpy(), rtol=1e-14)
    assert tuple(Tensor(np.zeros((0, 3))).mean(dim=1).shape) == tuple(torch.zeros(0, 3).mean(dim=1).shape)
    with pytest.raises(ValueError):
        torch.optim.Adam([torch.ones(2, requires_grad=True)], betas=(0.9, 1.2))


def test_dtypes_combine_as_documented_in_the_sheet():
    f32, scalar64 = Tensor(np.ones(2, dtype=np.float32)), Tensor(np.float64(2.0))
    assert (f32 * scalar64).dtype == np.float64  # NumPy's rule (PyTorch: float32)
    assert (f32 * 2.0).dtype == np.float32 and (Tensor([1, 2]) * 0.5).dtype == np.float64  # PyTorch's rule for numbers


def test_numpy_s_reductions_take_a_tensor():
    t = Tensor([1.0, 2.0, 4.0], requires_grad=True)
    np.sum(t).backward()  # NumPy calls t.sum(axis=None, dtype=None, out=None): a Tensor, with its gradient
    assert list(t.grad) == [1.0, 1.0, 1.0] and np.mean(t).item() == pytest.approx(7 / 3) and np.max(t).item() == 4.0
    # dtype= computes in that format, as PyTorch's sum(dtype=torch.float32); out= is refused
    assert t.sum(dtype=np.float32).dtype == np.float32 and t.mean(dtype=np.float16).dtype == np.float16
    with pytest.raises(TypeError, match="sum: haaw takes no out="):
        t.sum(out=np.zeros(()))


def test_every_leaf_keeps_a_gradient_array_of_its_own():
    a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    s = a + b
    (s.reshape(2, 1) * 1.0).sum().backward()
    a.grad[0] = 99.0  # the learner edits one gradient in place
    assert list(b.grad) == [1.0, 1.0] and list(s.grad) == [1.0, 1.0]  # no other gradient moved
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    y = x.reshape(3, 2)
    y.sum().backward()
    assert not np.shares_memory(x.grad, y.grad)


def test_var_and_std_read_a_second_positional_argument_as_unbiased_as_pytorch_does():
    """By hand: [[1, 2], [3, 6]] down axis 0 has squared distances 1 + 1 and 4 + 4: biased variances [1, 4],
    unbiased [2, 8]. haaw read x.var(0, False) as keepdim=False and gave [2, 8]."""
    x = Tensor([[1.0, 2.0], [3.0, 6.0]])
    assert x.var(0, False).data.tolist() == [1.0, 4.0] and x.std(0, False).data.tolist() == [1.0, 2.0]
    assert x.var(0, True).data.tolist() == [2.0, 8.0] and x.var(0, True, True).shape == (1, 2)
    assert x.var(False).item() == pytest.approx(np.var(x.data)) and x.var(0, keepdim=True).shape == (1, 2)
    with pytest.raises(TypeError, match=r"var: the second argument is unbiased, a bool.*x\.var\(0, keepdim=True\)"):
        x.var(0, 1)
    with pytest.raises(TypeError, match="std: give unbiased= or correction=, not both"):
        x.std(0, True, correction=0)


def test_the_shape_habits_follow_pytorch_s_rules_and_keep_the_gradient():
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert x.unsqueeze(-1).shape == (2, 3, 1) and x.unsqueeze(0).shape == (1, 2, 3) and x.dim() == 2
    assert x.squeeze(0).shape == (2, 3) and x[:1].squeeze().shape == (3,)  # an axis not of length 1 stays
    assert x.flatten().shape == (6,) and Tensor(3.0).flatten().shape == (1,)
    e = x[:, :1].expand(-1, 4)  # each entry of the column copied 4 times: its gradient is the sum of the 4
    assert e.data.tolist() == [[0.0] * 4, [3.0] * 4]
    (e * Tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    np.testing.assert_array_equal(x.grad, [[10.0, 0.0, 0.0], [10.0, 0.0, 0.0]])
    assert x.argmax().item() == 5 and x.argmin(dim=1).data.tolist() == [0, 0] and x.argmax().dtype == np.int64
    y = x * 2
    assert y.detach_() is y and not y.requires_grad and y._parents == ()
    assert x.new_zeros(2, 2).data.tolist() == [[0.0, 0.0], [0.0, 0.0]] and x.new_full((1,), 7.0).tolist() == [7.0]
    assert float(x[1, 2]) == 5.0 and int(x[1, 2]) == 5 and x.sum().tolist() == 15.0
    with pytest.raises(RuntimeError, match=r"item\(\): a tensor of shape \(2, 3\) holds 6 numbers, not one"):
        x.item()
    with pytest.raises(ValueError, match=r"expand: a tensor of shape \(2, 3\) cannot be expanded to \(3, 3\)"):
        x.expand(3, 3)


def test_a_tensor_bound_for_clamp_is_refused_with_what_to_write():
    x = Tensor([1.0, 5.0])
    with pytest.raises(TypeError, match=r"clamp: haaw's bounds are numbers.*haaw\.where\(x < low, low, x\)"):
        x.clamp(min=Tensor([2.0, 2.0]))


@pytest.mark.parametrize("owner, name, says", [
    ("tensor", "values", ".values belongs to that result"), ("tensor", "clone", "x * 1"), ("tensor", "abs", "haaw.where"),
    ("tensor", "zero_", "x.zero_grad()"), ("tensor", "mT", "x.transpose(-2, -1)"),
    ("haaw", "zeros_like", "haaw.tensor(np.zeros_like(x.data))"), ("haaw", "float32", "np.float32"),
    ("haaw", "inference_mode", "haaw.no_grad()")])
def test_a_pytorch_name_haaw_leaves_out_says_what_to_write_instead(owner, name, says):
    """An AttributeError still (hasattr is False), naming PyTorch's name and haaw's spelling; any other missing name
    gets Python's own message."""
    target = haaw if owner == "haaw" else Tensor([1.0])
    with pytest.raises(AttributeError) as missing:
        getattr(target, name)
    assert "PyTorch" in str(missing.value) and says in str(missing.value)
    assert not hasattr(target, name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        _ = target.no_such_name


def test_what_max_dim_returns_is_refused_in_arithmetic_and_max_takes_one_dim_as_pytorch():
    """x - x.max(1, keepdim=True) (NumPy's habit, torch's TypeError) would stack values and indices into one array;
    a tuple of dims and an entrywise second tensor are torch's amax and maximum, each refused with what to write."""
    x = Tensor([[1.0, 3.0], [4.0, 2.0]], requires_grad=True)
    for combine in (lambda: x - x.max(1, keepdim=True), lambda: x.min(0) * x, lambda: x.max(-1) + x,
                    lambda: x.detach() - x.detach().max(1)):
        with pytest.raises(TypeError, match=r"the \(values, indices\) that x\.m(ax|in)\(dim\) returns.*\.values"):
            combine()
    with pytest.raises(TypeError, match=r"dim must be one integer.*x\.amax\(\(0, 1\)\)"):
        x.max((0, 1))
    with pytest.raises(TypeError, match=r"x\.amin\(\[0\]\)"):
        x.min(axis=[0])
    with pytest.raises(TypeError, match=r"haaw\.where\(x > y, x, y\)"):
        x.max(x)
    with pytest.raises(IndexError, match="the smallest of no numbers"):
        Tensor(np.zeros((2, 0))).min(1)
    assert x.amax().item() == 4.0 and x.amin(dim=(0, 1)).item() == 1.0
