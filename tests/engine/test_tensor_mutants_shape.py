"""The PyTorch habits of the Tensor (unsqueeze, squeeze, flatten, expand, new_*, item, float(), int()), tensors in
lists, and hooks handed None: corners the mutation run of engine/tensor.py found untested.

Each is checked against an oracle that shares no code with haaw: PyTorch where it is installed, values worked
out by hand, or a refusal's whole message written out.
"""
import warnings

import numpy as np
import pytest

from haaw.engine import Function, Tensor


def _refusal(kind, call) -> str:
    with pytest.raises(kind) as caught:
        call()
    return str(caught.value)


# --- a (values, indices) result met by a tensor --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["max", "min"])
def test_a_values_indices_result_in_arithmetic_is_refused_naming_its_method_on_either_side(name):
    x = Tensor(np.ones((2, 3)))
    result = getattr(x, name)(0)
    message = (f"cannot combine a Tensor with the (values, indices) that x.{name}(dim) returns, as PyTorch's does: "
               f"take its .values (x.{name}(dim, keepdim=True).values)")
    assert _refusal(TypeError, lambda: x + result) == message
    assert _refusal(TypeError, lambda: result * x) == message


# --- tensors inside the list given to Tensor(...) -----------------------------------------------------------------
def test_a_list_of_tensors_needing_grad_and_numbers_takes_the_asked_format_as_torch_tensor_does():
    """NumPy cannot read a tensor that requires grad, so haaw reads each as its number; dtype= still applies."""
    a = Tensor(1.0, requires_grad=True)
    t = Tensor([[a, 2.0]], dtype=np.float32)
    assert t.dtype == np.float32 and t.shape == (1, 2) and t.data.tolist() == [[1.0, 2.0]]
    assert Tensor([[a, 2.0]]).dtype == np.float64
    torch = pytest.importorskip("torch")
    ta = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():  # torch may warn (once a process) of reading a tensor that requires grad
        warnings.simplefilter("ignore")
        tt = torch.tensor([[ta, 2.0]], dtype=torch.float32)
    assert tt.dtype == torch.float32 and tt.tolist() == [[1.0, 2.0]]


def test_one_number_tensors_of_shape_1_in_lists_take_the_asked_format():
    """NumPy gives each Tensor([1.]) an axis of its own; haaw reads it as one number (as torch.tensor does), in the
    format asked for."""
    t = Tensor([[Tensor([1.0])], [Tensor([2.0])]], dtype=np.float32)
    assert t.dtype == np.float32 and t.shape == (2, 1) and t.data.tolist() == [[1.0], [2.0]]
    torch = pytest.importorskip("torch")
    tt = torch.tensor([[torch.tensor([1.0])], [torch.tensor([2.0])]], dtype=torch.float32)
    assert tt.dtype == torch.float32 and tuple(tt.shape) == (2, 1)


# --- hooks handed None ----------------------------------------------------------------------------------------------
class _MakesOneUp:  # a hook without a __name__: the refusal names it by its repr
    def __call__(self, g):
        return np.ones(2)

    def __repr__(self):
        return "<MakesOneUp>"


class _Drop(Function):  # gives its input no gradient at all
    @staticmethod
    def forward(ctx, a):
        return a * 1

    @staticmethod
    def backward(ctx, g):
        return (None,)


def test_a_hook_object_given_none_that_returns_a_gradient_is_refused_by_its_repr_with_the_whole_message():
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.register_hook(_MakesOneUp())
    message = _refusal(RuntimeError, lambda: _Drop.apply(h).sum().backward())
    assert message == (
        "the hook <MakesOneUp> returned a gradient where it was given None: no gradient reached this tensor (a "
        "Function's backward returned None for it), and a hook cannot make one up. Return None when given None: "
        "`lambda g: None if g is None else ...` (PyTorch refuses too: \"can't replace a None gradient with a "
        "non-None value\")")
    assert x.grad is None


def test_a_hook_on_a_bfloat16_tensor_may_return_a_numpy_array_of_its_format():
    """The array a hook returns is read as it is: a bfloat16 array has no buffer format NumPy could rebuild it from.
    PyTorch: x.register_hook(lambda g: g * 2) on bfloat16 ones gives x.grad [2., 2., 2.] in bfloat16."""
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True, dtype="bfloat16")
    x.register_hook(lambda g: np.asarray(g) * 2)
    (x * 1).sum().backward()
    assert x.grad.dtype == x.dtype and x.grad.astype(np.float32).tolist() == [2.0, 2.0, 2.0]
    torch = pytest.importorskip("torch")
    tx = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16, requires_grad=True)
    tx.register_hook(lambda g: g * 2)
    (tx * 1).sum().backward()
    assert tx.grad.dtype == torch.bfloat16 and tx.grad.float().tolist() == [2.0, 2.0, 2.0]


# --- unsqueeze ------------------------------------------------------------------------------------------------------
def test_unsqueeze_takes_every_dim_from_minus_ndim_minus_1_to_ndim_as_torch():
    x = Tensor(np.zeros((2, 3)))
    torch = pytest.importorskip("torch")
    tx = torch.zeros(2, 3)
    for dim in range(-3, 3):
        assert x.unsqueeze(dim).shape == tuple(tx.unsqueeze(dim).shape), dim
    assert x.unsqueeze(-3).shape == (1, 2, 3)


@pytest.mark.parametrize("dim", [3, -4, True, 1.0], ids=["3", "-4", "True", "1.0"])
def test_unsqueeze_refuses_a_dim_out_of_range_a_bool_or_a_float_with_the_whole_message(dim):
    x = Tensor(np.zeros((2, 3)))
    assert _refusal(IndexError, lambda: x.unsqueeze(dim)) == (
        f"unsqueeze: dim {dim!r} is out of range for a tensor of shape (2, 3) (expected an integer from -3 to 2)")


# --- squeeze and flatten ------------------------------------------------------------------------------------------
def test_squeeze_with_a_dim_removes_only_that_axis_as_torch():
    x = Tensor(np.zeros((1, 2, 1)))
    assert x.squeeze(0).shape == (2, 1) and x.squeeze(-1).shape == (1, 2) and x.squeeze(1).shape == (1, 2, 1)
    assert x.squeeze((0, 2)).shape == (2,) and x.squeeze().shape == (2,)
    torch = pytest.importorskip("torch")
    tx = torch.zeros(1, 2, 1)
    assert [tuple(tx.squeeze(d).shape) for d in (0, -1, 1)] == [(2, 1), (1, 2), (1, 2, 1)]


def test_squeeze_and_flatten_refuse_a_dim_out_of_range_naming_themselves():
    x = Tensor(np.zeros((2, 3)))
    tail = "is out of range for a tensor of shape (2, 3) (expected an integer from -2 to 1)"
    assert _refusal(IndexError, lambda: x.squeeze(5)) == f"squeeze: dim 5 {tail}"
    assert _refusal(IndexError, lambda: x.flatten(5)) == f"flatten: dim 5 {tail}"
    assert _refusal(IndexError, lambda: x.flatten(0, -3)) == f"flatten: dim -3 {tail}"
    assert _refusal(TypeError, lambda: x.squeeze(1.5)) == "squeeze: dim must be an integer or a tuple of integers, " \
                                                          "got float 1.5"


def test_flatten_of_one_axis_alone_leaves_the_shape_and_a_start_after_the_end_is_refused_in_full():
    x = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x.flatten(1, 1).shape == (2, 3, 4) and x.flatten(-1, -1).shape == (2, 3, 4)
    assert x.flatten(1, 2).shape == (2, 12)
    assert _refusal(RuntimeError, lambda: x.flatten(2, 1)) == (
        "flatten: start_dim 2 comes after end_dim 1 (shape (2, 3, 4)), which PyTorch refuses too")
    torch = pytest.importorskip("torch")
    tx = torch.zeros(2, 3, 4)
    assert tuple(tx.flatten(1, 1).shape) == (2, 3, 4)
    with pytest.raises(RuntimeError):
        tx.flatten(2, 1)


# --- expand ---------------------------------------------------------------------------------------------------------
def test_expand_takes_sizes_one_by_one_keeps_an_axis_with_minus_1_and_keeps_the_format_as_torch():
    x = Tensor(np.array([[1], [2]], dtype=np.int32))  # shape (2, 1)
    e = x.expand(3, -1, 4)  # -1 keeps the axis of length 2, after one new leading axis
    assert e.shape == (3, 2, 4) and e.dtype == np.int32 and e.data[:, 1, :].tolist() == [[2] * 4] * 3
    one = Tensor(np.array([7.0], dtype=np.float32)).expand(3)
    assert one.shape == (3,) and one.dtype == np.float32 and one.data.tolist() == [7.0] * 3
    mask = Tensor(np.array([True])).expand(2, 3)
    assert mask.dtype == np.bool_ and mask.data.tolist() == [[True] * 3] * 2
    torch = pytest.importorskip("torch")
    te = torch.tensor([[1], [2]], dtype=torch.int32).expand(3, -1, 4)
    assert tuple(te.shape) == (3, 2, 4) and te.dtype == torch.int32
    assert torch.tensor([7.0]).expand(3).tolist() == [7.0] * 3
    assert torch.tensor([True]).expand(2, 3).tolist() == [[True] * 3] * 2


def test_expand_refusals_are_written_out_in_full():
    x = Tensor(np.zeros((2, 3)))
    assert _refusal(ValueError, lambda: x.expand(3)) == (
        "expand: 1 sizes for a tensor of 2 axes (shape (2, 3)): give one size for each axis, and more for new "
        "leading axes")
    assert _refusal(ValueError, lambda: x.expand(4, 3)) == (
        "expand: a tensor of shape (2, 3) cannot be expanded to (4, 3): only axes of length 1 can grow (as in "
        "PyTorch)")


# --- new_zeros, new_ones, new_full ----------------------------------------------------------------------------------
def test_new_tensors_of_zero_length_are_made_as_torch():
    x = Tensor(np.ones(2, dtype=np.float32))
    assert x.new_zeros(0).shape == (0,) and x.new_ones(2, 0).shape == (2, 0) and x.new_full((0,), 5.0).shape == (0,)
    assert x.new_zeros(0).dtype == np.float32
    torch = pytest.importorskip("torch")
    assert tuple(torch.ones(2).new_zeros(0).shape) == (0,)


@pytest.mark.parametrize("make, what, size", [
    (lambda x: x.new_zeros(-1), "new_zeros", "(-1,)"),
    (lambda x: x.new_zeros(2.5), "new_zeros", "(2.5,)"),
    (lambda x: x.new_ones(True), "new_ones", "(True,)"),
    (lambda x: x.new_ones((2, -3)), "new_ones", "(2, -3)"),
    (lambda x: x.new_full((-1,), 2.0), "new_full", "(-1,)"),
    (lambda x: x.new_full((True,), 2.0), "new_full", "(True,)"),
], ids=["zeros -1", "zeros 2.5", "ones True", "ones (2, -3)", "full -1", "full True"])
def test_new_tensors_refuse_a_size_that_is_not_whole_numbers_from_0_naming_the_method(make, what, size):
    x = Tensor(np.ones(2))
    assert _refusal(TypeError, lambda: make(x)) == (
        f"{what}: the size is whole numbers ≥ 0, as a tuple or one by one; got {size}")


# --- item, float(), int() -------------------------------------------------------------------------------------------
def test_item_float_and_int_of_several_numbers_are_refused_with_the_whole_message():
    x = Tensor(np.ones((2, 3)))
    assert _refusal(RuntimeError, x.item) == (
        "item(): a tensor of shape (2, 3) holds 6 numbers, not one (PyTorch refuses it too). Reduce it first "
        "(x.sum().item()), pick one entry (x[0, 0].item()), or take them all with x.tolist()")
    for convert in (float, int):
        assert _refusal(ValueError, lambda convert=convert: convert(x)) == (
            f"{convert.__name__}() of a tensor of shape (2, 3): only a tensor of one number converts to a Python "
            "number, as in PyTorch")
    assert float(Tensor([2.5])) == 2.5 and int(Tensor([[3.9]])) == 3
