"""Reductions and their refusals, pinned where a mutation run of haaw/engine/tensor.py found them unpinned:
sum's and mean's ``dtype=`` path with every other argument, min's refusals of NumPy's extras, the messages of
clamp, amax/amin, max/min and argmax/argmin, and std's ``x.std(False)``. Oracles: PyTorch where it answers the
same question, NumPy for what np.max(t, ...) asks of a tensor, and refusals written out in full."""
import numpy as np
import pytest

from haaw import Tensor

rng = np.random.default_rng(11)


def raises(kind, message, call):
    with pytest.raises(kind) as caught:
        call()
    assert str(caught.value) == message


@pytest.mark.parametrize("bounds", [{"min": Tensor(1.0)}, {"max": np.ones(3)}])
def test_clamp_refuses_a_tensor_of_bounds_with_the_where_to_write(bounds):
    x = Tensor(np.arange(3.0))
    raises(TypeError, "clamp: haaw's bounds are numbers; PyTorch also takes a tensor of bounds, entry by entry. "
           "For those write haaw.where(x < low, low, x) (and haaw.where(x > high, high, x))",
           lambda: x.clamp(**bounds))


@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("args, kwargs", [
    ((0,), {}), ((1, True), {}), ((), {"dim": 0, "keepdim": True}),
    ((), {"axis": 1}), ((), {"axis": 0, "keepdims": True}), ((1,), {"keepdims": True})])
def test_sum_and_mean_with_dtype_keep_every_other_argument_as_torch(name, args, kwargs):
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((3, 4)).astype(np.float32)
    ours = getattr(Tensor(data), name)(*args, dtype=np.float64, **kwargs)
    theirs = getattr(torch.tensor(data), name)(*args, dtype=torch.float64, **kwargs)
    assert ours.dtype == np.float64 and ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_refuse_out_but_not_dtype(name):
    x = Tensor(np.arange(6.0).reshape(2, 3))
    raises(TypeError, f"{name}: haaw takes no out= (every result is a new tensor)",
           lambda: getattr(x, name)(out=np.zeros(())))
    assert getattr(x, name)(dtype=np.float32).dtype == np.float32


def test_min_refuses_dtype_and_out_as_max_does():
    x = Tensor(np.arange(6.0).reshape(2, 3))
    message = "min: haaw takes no dtype= or out= (convert with .to(dtype) first)"
    raises(TypeError, message, lambda: x.min(dtype=np.float64))
    raises(TypeError, message, lambda: x.min(out=np.zeros(())))
    raises(TypeError, message, lambda: x.min(0, dtype=np.float64))


@pytest.mark.parametrize("what", ["max", "min"])
def test_amax_and_amin_name_themselves_in_their_refusals(what):
    x = Tensor(np.arange(6.0).reshape(2, 3))
    largest = "largest" if what == "max" else "smallest"
    raises(IndexError, f"a{what}: dim 5 is out of range for a tensor of shape (2, 3) (expected an integer from -2 "
           "to 1)", lambda: getattr(x, "a" + what)(dim=5))
    empty = Tensor(np.zeros((0, 3)))
    raises(IndexError, f"a{what}(dim=0) over an axis of length 0 (shape (0, 3)): the {largest} of no numbers has no "
           "value. PyTorch refuses it too; check the shape, or reduce over another axis",
           lambda: getattr(empty, "a" + what)(dim=0))


def test_min_of_a_tensor_as_second_operand_points_to_where_with_less_than():
    x = Tensor(np.arange(3.0))
    raises(TypeError, "min: haaw takes no tensor as the second operand (PyTorch's x.min(y), entry by entry). "
           "Write haaw.where(x < y, x, y)", lambda: x.min(x))
    raises(TypeError, "max: haaw takes no tensor as the second operand (PyTorch's x.max(y), entry by entry). "
           "Write haaw.where(x > y, x, y)", lambda: x.max(x))


@pytest.mark.parametrize("what", ["max", "min"])
@pytest.mark.parametrize("by", ["dim", "axis"])
def test_max_and_min_over_several_axes_are_refused_naming_what_was_given(what, by):
    x = Tensor(np.arange(6.0).reshape(2, 3))
    largest = "largest" if what == "max" else "smallest"
    raises(TypeError, f"{what}: dim must be one integer, as in PyTorch (x.{what}(dim) also returns where each "
           f"{largest} entry is, along that one axis); got (0, 1). For the values over several axes write "
           f"x.a{what}((0, 1)), as in PyTorch", lambda: getattr(x, what)(**{by: (0, 1)}))


@pytest.mark.parametrize("what", ["max", "min"])
def test_numpy_s_max_keepdims_of_a_tensor_keeps_every_axis_as_numpy(what):
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((2, 3))
    ours = getattr(np, what)(Tensor(data), keepdims=True)
    assert isinstance(ours, Tensor) and ours.shape == getattr(np, what)(data, keepdims=True).shape == (1, 1)
    theirs = getattr(torch, "a" + what)(torch.tensor(data), dim=(0, 1), keepdim=True)
    np.testing.assert_array_equal(ours.data, theirs.numpy())


@pytest.mark.parametrize("what", ["argmax", "argmin"])
def test_argmax_and_argmin_name_themselves_in_their_refusals(what):
    raises(RuntimeError, f"{what}() of an empty tensor (shape (0,)): there is no entry to point to. PyTorch refuses "
           "it too", lambda: getattr(Tensor(np.zeros(0)), what)())
    raises(IndexError, f"{what}: dim 5 is out of range for a tensor of shape (2, 3) (expected an integer from -2 "
           "to 1)", lambda: getattr(Tensor(np.ones((2, 3))), what)(dim=5))


def test_std_of_a_bool_first_is_unbiased_as_torch_reads_it():
    torch = pytest.importorskip("torch")
    data = rng.standard_normal((3, 4))
    for unbiased in (False, True):
        ours = Tensor(data).std(unbiased)
        theirs = torch.tensor(data).std(unbiased)
        assert ours.shape == () and ours.item() == pytest.approx(theirs.item(), rel=1e-12)
    assert Tensor([1.0, 3.0]).std(False).item() == 1.0  # by hand: the mean 2, each 1 away, divided by N
