"""Corners of the Tensor's forward and backward that the mutation run of engine/tensor.py found untested.

Each is checked against an oracle that shares no code with haaw: PyTorch where it is installed, values worked
out by hand, or a refusal's whole message written out.
"""
import numpy as np
import pytest

import haaw
from haaw.engine import Function, Tensor, detect_anomaly, saved_tensors_hooks


# --- numbers met by a tensor (_lift) -----------------------------------------------------------------------------
def test_a_numpy_float_with_an_integer_tensor_gives_the_default_float_as_a_python_float_does():
    """PyTorch reads a NumPy float32 as a plain number: int tensor times it is its default float, as times 0.5."""
    half = Tensor(np.array([1, 2], dtype=np.int16)) * np.float32(0.5)
    assert half.dtype == np.float64 and half.data.tolist() == [0.5, 1.0]
    assert (Tensor(np.array([1, 2], dtype=np.int8)) * np.float16(0.5)).dtype == np.float64
    torch = pytest.importorskip("torch")
    small = torch.tensor([1, 2], dtype=torch.int16)
    assert (small * np.float32(0.5)).dtype == (small * 0.5).dtype == torch.get_default_dtype()


def test_a_numpy_integer_with_a_bool_tensor_gives_int64_as_in_pytorch():
    total = Tensor([True, False]) + np.int8(100)
    assert total.dtype == np.int64 and total.data.tolist() == [101, 100]
    torch = pytest.importorskip("torch")
    assert (torch.tensor([True, False]) + np.int8(100)).dtype == torch.int64


def test_a_python_float_with_a_float16_tensor_is_used_in_float32_and_rounded_once_as_pytorch():
    """1.796 (float16) × 0.9475258626767992: the float32 product rounds to float16's 1.701, the exact one to 1.702;
    PyTorch computes in float32 and gives 1.701."""
    a, b = np.float16(1.796), 0.9475258626767992
    got = (Tensor(np.array([a])) * b).data
    assert got.dtype == np.float16 and got[0] == np.float16(1.701)
    assert (b * Tensor(np.array([a]))).data[0] == np.float16(1.701)
    torch = pytest.importorskip("torch")
    assert got[0] == (torch.tensor([float(a)], dtype=torch.float16) * b).item()


# --- backward's start ----------------------------------------------------------------------------------------
def test_backward_s_refusals_say_their_whole_message():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(NotImplementedError) as err:
        (x * x).sum().backward(create_graph=True)
    assert str(err.value) == ("backward(create_graph=True): haaw does not record the backward pass, so it has no "
                              "gradients of gradients (PyTorch does)")
    with pytest.raises(RuntimeError) as err:
        Tensor([1.0]).backward()
    assert str(err.value) == ("backward(): this tensor does not require a gradient: none of the tensors it was "
                              "computed from has requires_grad=True (or it was made under no_grad)")
    with pytest.raises(RuntimeError) as err:
        (x * 2).backward()
    assert str(err.value) == ("backward() on a tensor of shape (2,) needs a gradient: pass gradient=, an array of the "
                              "same shape holding dL/d(this tensor), or reduce it to a scalar first (e.g. loss = "
                              "y.sum())")


def test_a_float64_gradient_for_a_float32_tensor_is_rounded_to_float32_first_as_pytorch():
    """PyTorch casts the gradient given to backward to the tensor's format before it flows on: here 0.11 in float32,
    times 3 in float32 (0.32999998), which is not 0.33 computed in float64 and rounded."""
    x = Tensor(np.ones(1, dtype=np.float32), requires_grad=True)
    y = x * np.float32(3.0)
    seen = []
    y.register_hook(lambda g: seen.append(g.dtype))
    y.backward(gradient=np.array([0.11]))
    assert seen == [np.float32]
    assert x.grad[0] == np.float32(np.float32(0.11) * np.float32(3.0)) != np.float32(0.11 * 3.0)
    torch = pytest.importorskip("torch")
    t = torch.ones(1, dtype=torch.float32, requires_grad=True)
    (t * 3.0).backward(gradient=torch.tensor([0.11], dtype=torch.float64))
    assert x.grad[0] == t.grad.item()


def test_the_gradient_given_may_be_a_tensor_that_requires_grad_as_in_pytorch():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).backward(gradient=Tensor([1.0, 10.0], requires_grad=True))
    assert x.grad.tolist() == [3.0, 30.0]


# --- what backward hands to the leaves ----------------------------------------------------------------------
def test_leaves_that_share_an_upstream_gradient_get_arrays_of_their_own():
    """a + b hands the gradient it received to both: editing a.grad must leave b.grad alone (as two tensors in
    PyTorch), also when that gradient is the one passed to backward itself."""
    a, b = Tensor(np.ones(3), requires_grad=True), Tensor(np.ones(3), requires_grad=True)
    given = np.array([1.0, 2.0, 3.0])
    z = a + b
    z.backward(gradient=given)
    a.grad *= 0
    assert b.grad.tolist() == z.grad.tolist() == given.tolist() == [1.0, 2.0, 3.0]
    torch = pytest.importorskip("torch")
    ta, tb = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    tz = ta + tb
    tz.retain_grad()
    tz.backward(gradient=torch.tensor([1.0, 2.0, 3.0]))
    ta.grad.zero_()
    assert tb.grad.tolist() == tz.grad.tolist() == [1.0, 2.0, 3.0]


def test_an_intermediate_s_gradient_is_an_array_that_can_be_written_to():
    """sum's backward stretches its gradient without copying (a read-only broadcast); the tensor that receives it
    still holds an ordinary array, as PyTorch's retained .grad is an ordinary tensor."""
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 2.0
    y.sum(dim=0).sum().backward()
    y.grad[0, 0] = 5.0
    assert y.grad.tolist() == [[5.0, 1.0], [1.0, 1.0]] and x.grad.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    u = t * 2.0
    u.retain_grad()
    u.sum(dim=0).sum().backward()
    u.grad[0, 0] = 5.0
    assert u.grad.tolist() == y.grad.tolist()


def test_anomaly_detection_does_not_blame_an_operation_for_an_infinite_gradient_it_was_given():
    """Only a backward that makes inf or nan out of a finite gradient is named; passing inf on is not (PyTorch's
    anomaly mode is silent about inf too)."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    with detect_anomaly():
        (x * 2.0).backward(gradient=np.array([np.inf, 1.0]))
    assert x.grad.tolist() == [np.inf, 2.0]
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="Anomaly Detection"), torch.autograd.detect_anomaly(check_nan=True):
        (t * 2.0).backward(gradient=torch.tensor([np.inf, 1.0]))
    assert t.grad.tolist() == x.grad.tolist()


# --- operations ------------------------------------------------------------------------------------------------
def test_autocast_leaves_an_integer_matrix_product_in_integers_as_pytorch():
    a = Tensor([[1, 2], [3, 4]])
    with haaw.amp.autocast("cpu", dtype="bfloat16"):
        p = a @ a
    assert p.dtype == np.int64 and p.data.tolist() == [[7, 10], [15, 22]]
    torch = pytest.importorskip("torch")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q = torch.tensor([[1, 2], [3, 4]]) @ torch.tensor([[1, 2], [3, 4]])
    assert q.dtype == torch.int64


def test_mean_of_integers_is_refused_with_its_whole_message():
    with pytest.raises(TypeError) as err:
        Tensor([1, 2]).mean()
    assert str(err.value) == ("mean() of a int64 tensor: a mean needs floating-point numbers, as in PyTorch. Convert "
                              "first: x.to(np.float64).mean(), or use sum() for a count")


class _Scale(Function):
    """y = x · w (+ b), saving all three with PyTorch's save_for_backward (b may be None)."""

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w, b)
        return x * w if b is None else x * w + b

    @staticmethod
    def backward(ctx, g):
        x, w, b = ctx.saved_tensors
        return g * w, g * x, None if b is None else g


def test_arrays_saved_with_save_for_backward_go_through_saved_tensors_hooks_as_in_pytorch():
    """pack at the forward pass, unpack at backward, once per saved array; backward computes with what unpack
    returned (here the saved values times 10, so the gradients are 10 times the true ones)."""
    log = []

    def pack(a):
        log.append("pack")
        return a.copy()

    def unpack(a):
        log.append("unpack")
        return a * 10.0

    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 4.0], requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = _Scale.apply(x, w, None)  # None is saved as it is, and neither packed nor unpacked
    assert log == ["pack", "pack"]
    y.sum().backward()
    assert log == ["pack", "pack", "unpack", "unpack"]
    assert x.grad.tolist() == [30.0, 40.0] and w.grad.tolist() == [10.0, 20.0]
    torch = pytest.importorskip("torch")

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, c):
            ctx.save_for_backward(a, b, c)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, b, _ = ctx.saved_tensors
            return g * b, g * a, None

    theirs = []
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    tw = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda a: theirs.append("pack") or a.clone(),
                                                   lambda a: theirs.append("unpack") or a * 10.0):
        ty = Scale.apply(tx, tw, None)
    ty.sum().backward()
    assert theirs == log and tx.grad.tolist() == x.grad.tolist() and tw.grad.tolist() == w.grad.tolist()


def test_an_operation_that_saves_no_array_packs_nothing_and_still_runs_backward():
    """mean keeps only sizes (a count, shapes) for its backward: nothing to pack, in haaw as in PyTorch."""
    log = []
    x = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with saved_tensors_hooks(lambda a: log.append("pack") or a, lambda a: log.append("unpack") or a):
        m = x.mean()
    m.backward()
    assert log == [] and x.grad.tolist() == [0.25] * 4
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda a: log.append("pack") or a,
                                                   lambda a: log.append("unpack") or a):
        tm = t.mean()
    tm.backward()
    assert log == [] and t.grad.tolist() == x.grad.tolist()


def test_your_linear_backward_with_the_wrong_count_of_gradients_is_refused_by_the_operation_s_name():
    x, w, b = (Tensor(np.ones(s), requires_grad=True) for s in ((2, 3), (3, 4), (4,)))
    with haaw.use(linear=lambda X, W, G: (G @ W.T, X.T @ G)):
        y = haaw.nn.functional.linear(x, w, b)
        with pytest.raises(ValueError) as err:
            y.sum().backward()
    assert str(err.value) == ("the backward of 'linear' returned 2 gradient(s) for 3 input(s): return one per input "
                              "(None where there is none)")


# --- fixes found on the way -------------------------------------------------------------------------------------
def test_a_number_written_in_place_into_float32_is_rounded_to_float32_first_as_pytorch():
    """x32 += v for a NumPy float64 v: PyTorch rounds v to float32 and adds in float32, as haaw's x32 + v does.
    1.924406 + 0.0006050467408452515 is 1.9250112 that way, and 1.925011 added in float64 and then rounded."""
    a, v = np.float32(1.924406), np.float64(0.0006050467408452515)
    x = Tensor(np.array([a]))
    x += v
    assert x.data[0] == (Tensor(np.array([a])) + v).data[0] == np.float32(a + np.float32(v)) != np.float32(a + v)
    y = Tensor(np.array([2.0, 3.0]))
    y += v  # float64 tensors add the number as given
    assert y.data.tolist() == [2.0 + v, 3.0 + v]
    torch = pytest.importorskip("torch")
    t = torch.tensor([a])
    t += v
    assert x.data[0] == t.item()


def test_a_leaf_whose_hook_hands_back_the_gradient_it_saw_gets_an_array_it_can_write_to():
    """The hook sees a read-only array; returning it (a pass-through hook that logs) must not leave .grad read-only:
    in PyTorch x.grad.zero_() works after any hook."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g)
    (x * 3.0).sum().backward()
    x.grad *= 0
    assert x.grad.tolist() == [0.0, 0.0]
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    t.register_hook(lambda g: g)
    (t * 3.0).sum().backward()
    t.grad.zero_()
    assert t.grad.tolist() == x.grad.tolist()


def test_an_operation_on_infinite_inputs_is_not_blamed_for_its_infinite_result_under_anomaly_detection():
    x = Tensor([np.inf, 1.0], requires_grad=True)
    with detect_anomaly():
        y = x * 2.0
    assert y.data.tolist() == [np.inf, 2.0]
    with detect_anomaly(), np.errstate(divide="ignore"), pytest.raises(FloatingPointError) as err:
        Tensor([0.0]).log()
    assert str(err.value) == "anomaly: the forward of 'log' produced nan or inf from finite inputs (input shapes [(1,)])"


def test_saved_tensors_hooks_see_nothing_of_an_operation_that_records_nothing_as_in_pytorch():
    packed = []
    with saved_tensors_hooks(lambda a: packed.append(a) or a, lambda a: a):
        Tensor([1.0, 2.0]).exp() * 3.0  # no input requires a gradient: nothing is saved for a backward
        with haaw.no_grad():
            Tensor([1.0, 2.0], requires_grad=True).exp()
    assert packed == []
    torch = pytest.importorskip("torch")
    with torch.autograd.graph.saved_tensors_hooks(lambda a: packed.append(a) or a, lambda a: a):
        torch.tensor([1.0, 2.0]).exp() * 3.0
        with torch.no_grad():
            torch.tensor([1.0, 2.0], requires_grad=True).exp()
    assert packed == []


# --- making a tensor --------------------------------------------------------------------------------------------
def test_a_dtype_given_by_name_is_that_format_and_a_wrong_name_is_refused_whole():
    assert Tensor([1, 2], dtype="float32").dtype == np.float32
    assert Tensor([[Tensor(1.0), 2.0]], dtype="float32").dtype == np.float32  # a tensor further in, too
    assert Tensor([[Tensor(1.0), 2.0]], dtype=np.float32).dtype == np.float32
    with pytest.raises(TypeError) as err:
        Tensor([1.0], dtype="float31")
    assert str(err.value) == ("Tensor(dtype=...): 'float31' is not a number format (try np.float32, np.float16 or "
                              "'bfloat16')")


def test_a_tensor_made_from_a_tensor_holds_its_values_in_memory_of_its_own_as_torch_tensor():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor(a)
    a.data[0] = 9.0
    assert b.data.tolist() == [1.0, 2.0] and not b.requires_grad


def test_an_integer_tensor_that_asks_for_a_gradient_is_refused_whole():
    with pytest.raises(TypeError) as err:
        Tensor([1, 2], requires_grad=True)
    assert str(err.value) == ("only floating-point tensors can require gradients; this one is int64 (make it from "
                              "floats, or pass dtype=np.float64)")


def test_the_result_of_an_operation_has_no_label():
    x = Tensor([1.0], label="x")
    assert x.label == "x" and (x * 2.0).label == "" and x.detach().label == ""


def test_the_memory_tracker_counts_nothing_saved_under_no_grad():
    from haaw.tools.memory import track_memory

    x = Tensor(np.ones((4, 4)), requires_grad=True)
    with track_memory() as memory, haaw.no_grad():
        x.exp().tanh()
    assert memory.total_saved == 0
    with track_memory() as memory:
        x.exp()
    assert memory.total_saved == 4 * 4 * 8  # exp keeps its result for backward: 16 float64s
