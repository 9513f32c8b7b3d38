"""The Tensor: the shared backward, accumulation, dtypes, and errors a learner can read."""
import numpy as np
import pytest

from haaw.engine import Tensor, cat, from_numpy, no_grad, stack, tensor
from haaw.engine.autograd import topological_order
from haaw.engine.tensor import apply
from haaw.tools import gradcheck

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


def test_detach_and_no_grad_cut_the_graph():  # noqa: D103
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
    (lambda: Tensor(np.ones((3, 4))) @ Tensor(np.ones((3, 2))), ValueError, "inner dimensions 4 and 3 differ"),
    (lambda: Tensor(np.ones((3, 4))) @ Tensor(np.ones((5, 4))), ValueError, "inner dimensions 4 and 5 differ"),
    (lambda: Tensor(np.ones((2, 5, 4))) @ Tensor(np.ones((5, 2))), ValueError, "inner dimensions 4 and 5 differ"),
    (lambda: Tensor(np.ones((2, 3, 4))) @ Tensor(np.ones((3, 4, 5))), ValueError,
     r"batch dimensions \(2,\) and \(3,\) do not broadcast"),
    (lambda: Tensor(np.ones((4, 3, 4))) @ Tensor(np.ones((2, 4, 5))), ValueError,
     r"batch dimensions \(4,\) and \(2,\) do not broadcast"),
    (lambda: Tensor(np.ones(3)) @ Tensor(np.ones((3, 2))), ValueError, "at least 2 dimensions"),
    (lambda: Tensor(np.ones((3, 4))) + Tensor(np.ones(5)), ValueError,
     r"add: shapes \(3, 4\) and \(5,\) cannot be broadcast"),
    (lambda: Tensor(np.ones((2, 3)), requires_grad=True).backward(), RuntimeError,
     r"backward\(\) on a tensor of shape \(2, 3\) needs a gradient"),
    (lambda: Tensor(np.ones(2), requires_grad=True).sum().backward(np.ones(3)), ValueError,
     r"backward\(gradient=...\): it has shape \(3,\)"),
    (lambda: Tensor(np.ones(2)).sum().backward(), RuntimeError, "does not require a gradient"),
    (lambda: Tensor(np.array([1, 2]), requires_grad=True), TypeError, "only floating-point tensors"),
    (lambda: Tensor("abc"), TypeError, "Tensor holds numbers"),
    (lambda: Tensor(np.ones((2, 3))).reshape(4, 2), ValueError, r"cannot reshape \(2, 3\)"),
    (lambda: Tensor(np.ones((2, 3)))[5], IndexError, r"indexing a tensor of shape \(2, 3\)"),
    (lambda: cat([Tensor(np.ones((2, 3))), Tensor(np.ones((2, 4)))]), ValueError,
     "cat along dim 0"),
    (lambda: Tensor(np.ones((2, 3))).sum(dim=2), IndexError, r"dim 2 is out of range for a tensor of shape \(2, 3\)"),
    (lambda: Tensor(np.ones((2, 3))).sum(dim=0, axis=0), TypeError, "dim= or axis=, not both"),
    (lambda: Tensor(np.ones((2, 3))).permute(0, 0), ValueError, "each of its 2 axes exactly once"),
    (lambda: Tensor(np.ones((2, 3))).permute(0, 2), ValueError, "each of its 2 axes exactly once"),
    (lambda: Tensor(np.ones((2, 3))).permute(0, 3), ValueError, "each of its 2 axes exactly once"),
    (lambda: Tensor(np.ones((2, 3))).permute(2, 1), ValueError, "each of its 2 axes exactly once"),  # 2 is not 0
    (lambda: Tensor(np.ones((2, 3))).permute(0, 1.0), ValueError, "each of its 2 axes exactly once"),
    (lambda: Tensor(np.ones((2, 3))).transpose(0, 2), IndexError, "dim 2 is out of range"),
    (lambda: np.sin(Tensor(np.ones(2))), TypeError, "np.sin cannot record a Tensor"),
    (lambda: np.asarray(Tensor(np.ones(2), requires_grad=True)), TypeError, "requires a gradient"),
    (lambda: from_numpy([1.0]), TypeError, "expected a NumPy array"),
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
    assert repr(Tensor(np.array([1.23456, 2.0]))) == "Tensor([1.2346, 2.    ])"  # 4 decimals
    assert "..." not in repr(Tensor(np.arange(20.0))) and "..." in repr(Tensor(np.arange(21.0)))  # up to 20 entries


# --- each of these once gave a wrong answer without an error ---------------------------------------------
@pytest.mark.parametrize("dims, shape", [((0, -1), (2, 3)), ((-1, 0), (2, 3)), ((-3, -1), (2, 3, 4)),
                                         ((1, -2), (2, 3, 4)), ((-1, -1), (2, 3))])
def test_transpose_with_negative_dims_swaps_the_right_axes_forward_and_backward(dims, shape):
    x = rng.standard_normal(shape)
    expected = np.swapaxes(x, *dims)
    t = Tensor(x, requires_grad=True)
    y = t.transpose(*dims)
    np.testing.assert_array_equal(y.data, expected)
    g = rng.standard_normal(expected.shape)
    y.backward(g)
    np.testing.assert_array_equal(t.grad, np.swapaxes(g, *dims))


def test_permute_with_negative_dims_and_its_gradient():
    x = Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    y = x.permute(-1, 0, -2)
    assert y.shape == (4, 2, 3)
    g = rng.standard_normal(y.shape)
    y.backward(g)
    np.testing.assert_array_equal(x.grad, np.transpose(g, (1, 2, 0)))


@pytest.mark.parametrize("make, expected, dtype", [
    (lambda: Tensor([1, 2, 3]) * 0.5, [0.5, 1.0, 1.5], np.float64),
    (lambda: 0.5 * Tensor([1, 2, 3]), [0.5, 1.0, 1.5], np.float64),
    (lambda: Tensor([1, 2, 3]) / 2, [0.5, 1.0, 1.5], np.float64),
    (lambda: Tensor([1, 2, 3]) + 0.25, [1.25, 2.25, 3.25], np.float64),
    (lambda: Tensor([1, 2, 3]) * 2, [2, 4, 6], np.int64),
    (lambda: Tensor(np.ones(2, np.float32)) * 2.5, [2.5, 2.5], np.float32),
    (lambda: Tensor(np.ones(2, np.float32)) * np.float64(2.5), [2.5, 2.5], np.float32),
    (lambda: Tensor(np.ones(2, np.float16)) + 1, [2.0, 2.0], np.float16),
    (lambda: Tensor([1, 4]) ** 0.5, [1.0, 2.0], np.float64),
])
def test_python_and_numpy_scalars_follow_pytorch_s_type_promotion(make, expected, dtype):
    out = make()
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.data, expected)


@pytest.mark.parametrize("make, expected", [
    (lambda t: np.float64(2.0) * t, [2.0, 4.0]),
    (lambda t: np.ones(2) + t, [2.0, 3.0]),
    (lambda t: np.ones(2) - t, [0.0, -1.0]),
    (lambda t: np.array([2.0, 4.0]) / t, [2.0, 2.0]),
    (lambda t: np.ones((1, 2)) @ t.reshape(2, 1), [[3.0]]),
    (lambda t: np.exp(t), np.exp([1.0, 2.0])),
    (lambda t: np.negative(t), [-1.0, -2.0]),
])
def test_numpy_on_the_left_gives_a_recorded_tensor_not_an_object_array(make, expected):
    t = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    out = make(t)
    assert isinstance(out, Tensor) and out.requires_grad
    np.testing.assert_allclose(out.data, expected)
    out.sum().backward()
    assert t.grad.shape == (2,) and np.all(t.grad != 0)


def test_a_tensor_copies_the_array_it_is_made_from_and_from_numpy_shares_it():
    a = np.ones(3)
    t, shared = Tensor(a), from_numpy(a)
    a[0] = 5.0
    assert t.data[0] == 1.0 and shared.data[0] == 5.0
    assert tensor([1.0, 2.0], requires_grad=True).requires_grad


def edit_through(kind, h):
    """Change h's numbers in place through a view, detach() or a reshape, outside the graph."""
    with no_grad():
        if kind == "detach":
            d = h.detach()
            d += 1.0
        elif kind == "slice":
            s = h[0:1]
            s *= 3.0
        elif kind == "reshape":
            r = h.reshape(-1)
            r[0] = 7.0
        elif kind == "transpose":
            r = h.T
            r -= 1.0
        elif kind == "item":
            h[1] = 0.0


@pytest.mark.parametrize("kind", ["detach", "slice", "reshape", "transpose", "item"])
def test_an_in_place_edit_through_a_view_or_detach_is_caught_at_backward(kind):
    w = Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    h = w.exp()  # exp keeps its output for backward
    loss = h.sum()
    edit_through(kind, h)
    with pytest.raises(RuntimeError, match="backward of 'exp' needs its output.*modified in place"):
        loss.backward()


def test_an_in_place_edit_of_a_view_of_data_that_was_saved_is_caught():
    x = Tensor(np.ones((2, 3)))
    w = Tensor(np.ones((3, 1)), requires_grad=True)
    rows = x[0:1]  # a view of x, saved by the matmul
    loss = (rows @ w).sum()
    x += 1.0  # edits rows too
    with pytest.raises(RuntimeError, match="backward of 'matmul' needs input 0"):
        loss.backward()


def test_x_to_the_power_zero_has_gradient_zero_even_at_zero():
    x = Tensor(np.array([0.0, 2.0]), requires_grad=True)
    (x**0).sum().backward()
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


def test_a_zero_dimensional_tensor_accepts_dim_0_and_minus_1_like_pytorch():
    t = Tensor(np.array(3.0), requires_grad=True)
    assert t.sum(dim=0).item() == 3.0 and t.mean(dim=-1).item() == 3.0
    assert t.max(dim=0, keepdim=True).values.item() == 3.0 and t.min(dim=-1).indices.item() == 0
    t.softmax(dim=0).backward()
    assert t.grad == 0.0
    with pytest.raises(IndexError, match="out of range"):
        t.sum(dim=1)


def test_pytorch_names_dim_keepdim_and_numpy_names_axis_keepdims_mean_the_same():
    x = rng.standard_normal((2, 3, 4))
    t = Tensor(x)
    for name in ("sum", "mean"):
        a = getattr(t, name)(dim=(0, -1), keepdim=True).data
        b = getattr(t, name)(axis=(0, 2), keepdims=True).data
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, getattr(x, name)(axis=(0, 2), keepdims=True))
    for name in ("amax", "amin"):  # PyTorch's names for values only, over several axes
        np.testing.assert_array_equal(getattr(t, name)(dim=(0, -1), keepdim=True).data,
                                      getattr(x, name[1:])(axis=(0, 2), keepdims=True))
    for name in ("max", "min"):  # along one axis: (values, indices), as PyTorch's, with either spelling
        a, b = getattr(t, name)(dim=-1, keepdim=True), getattr(t, name)(axis=2, keepdims=True)
        np.testing.assert_array_equal(a.values.data, b.values.data)
        np.testing.assert_array_equal(a.indices.data, getattr(x, "arg" + name)(axis=2, keepdims=True))
    np.testing.assert_array_equal(t.softmax(dim=1).data, t.softmax(axis=1).data)
    assert t.size() == (2, 3, 4) and t.size(-1) == 4 and t.numel() == 24


def test_a_vjp_that_returns_the_wrong_shape_is_refused_and_named():
    from haaw.engine import Function

    class Bad(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g.sum()

    with pytest.raises(ValueError, match=r"backward of 'Bad' returned a gradient of shape \(\) for its input 0"):
        Bad.apply(Tensor(np.ones(3), requires_grad=True)).sum().backward()


def test_editing_a_copy_made_by_fancy_indexing_leaves_the_source_s_saved_values_valid():
    x = Tensor(np.array([1.0, 2.0, 3.0]))
    w = Tensor(np.ones(3), requires_grad=True)
    loss = (x * w).sum()  # mul saves x
    picked = x[np.array([0, 2])]  # a copy, not a view: it shares nothing with x
    picked += 10.0
    loss.backward()
    np.testing.assert_array_equal(w.grad, [1.0, 2.0, 3.0])


def test_a_new_tensor_is_at_version_0_and_each_in_place_change_adds_1():
    w = Tensor(np.ones(2), requires_grad=True)
    y = w * 2.0
    assert w._version == 0 and y._version == 0 and w.detach()._version == 0
    with no_grad():
        y += 1.0
        y *= 3.0
    assert y._version == 2 and w._version == 0


def test_an_in_place_edit_is_caught_even_when_every_tensor_of_the_operation_was_edited():
    w = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    h = w.exp()  # exp saves its output; the input's version is noted too
    with no_grad():
        w += 1.0
        h *= 2.0
    with pytest.raises(RuntimeError, match="backward of 'exp' needs its output"):
        h.sum().backward()


def test_a_float32_leaf_combined_with_float64_gets_its_gradient_in_float32():
    w = Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    y = w * np.array([0.5, 0.25])  # a float64 array: the product is float64
    assert y.dtype == np.float64
    y.sum().backward()
    assert w.grad.dtype == np.float32
    np.testing.assert_array_equal(w.grad, [0.5, 0.25])


def test_requires_grad__turns_recording_on_or_off_for_floats_only_and_returns_the_tensor():
    t = Tensor(np.ones(2))
    assert t.requires_grad_() is t and t.requires_grad
    assert t.requires_grad_(False) is t and not t.requires_grad
    ints = Tensor(np.array([1, 2]))
    assert ints.requires_grad_(False) is ints and not ints.requires_grad
    with pytest.raises(TypeError, match="only floating-point tensors can require gradients"):
        ints.requires_grad_()


def test_cat_of_a_single_tensor_is_a_copy_and_0d_tensors_are_refused():
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    out = cat([a])
    np.testing.assert_array_equal(out.data, [1.0, 2.0])
    out.sum().backward()
    np.testing.assert_array_equal(a.grad, [1.0, 1.0])
    with pytest.raises(ValueError, match="at least 1"):
        cat([Tensor(1.0), Tensor(2.0)])


def test_from_numpy_takes_a_0d_array_and_refuses_what_tensor_refuses():
    t = from_numpy(np.array(3.0))
    assert t.shape == () and t.item() == 3.0
    with pytest.raises(TypeError):
        from_numpy(np.array(["a", "b"]))


def test_integer_and_bool_tensors_follow_pytorch_or_are_refused():
    import math

    sig = Tensor([1, 2]).sigmoid()  # computed in floats, not truncated to [0, 0]
    np.testing.assert_allclose(sig.data, [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(-2))], rtol=1e-15)
    assert Tensor([0, 1]).exp().data.dtype == np.float64 and Tensor([1, 4]).log().data[1] == math.log(4)
    with pytest.raises(TypeError, match=r"mean\(\) of a int64 tensor: a mean needs floating-point numbers"):
        Tensor([1, 2]).mean()
    counted = Tensor([True, True, False]).sum()
    assert counted.data.dtype == np.int64 and counted.item() == 2  # a count, not True
    assert Tensor(np.array([100, 100], dtype=np.int8)).sum().item() == 200  # not -56
    np.testing.assert_array_equal(Tensor(np.array([[100, 100]], dtype=np.int8)).sum(dim=1).data, [200])
    more = Tensor([True, True]) + 1
    assert more.data.dtype == np.int64 and list(more.data) == [2, 2]  # not [True, True]


def test_integer_and_bool_results_match_torch():
    torch = pytest.importorskip("torch")
    cases = [(lambda t: t.sigmoid(), [1, 2]), (lambda t: t.sum(), [True, True, False]),
             (lambda t: t + 1, [True, False]), (lambda t: t.exp(), [0, 1, 2])]
    for fn, values in cases:
        ours, theirs = fn(Tensor(values)).data, fn(torch.tensor(values)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
        assert ours.dtype.kind == theirs.dtype.kind  # float stays float, integer stays integer
    assert Tensor(np.array([100, 100], dtype=np.int8)).sum().item() == torch.tensor([100, 100], dtype=torch.int8).sum().item()


@pytest.mark.parametrize("make", [np.array, list, lambda i: (np.array(i),)])
def test_an_index_changed_after_the_forward_pass_does_not_move_the_gradient(make):
    x = tensor(np.arange(3.0), requires_grad=True)
    idx = make([0, 0, 2])
    y = x[idx]
    (idx[0] if isinstance(idx, tuple) else idx)[0] = 1  # the learner reuses the array for something else
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, 1.0])  # what the forward pass picked


def test_targets_changed_after_the_forward_pass_do_not_change_cross_entropy_s_gradient():
    logits = tensor(np.zeros((2, 3)), requires_grad=True)
    targets = np.array([0, 2])
    loss = apply("cross_entropy_rows", logits, targets=targets).mean()  # what F.cross_entropy runs
    targets[:] = 1
    loss.backward()
    np.testing.assert_allclose(logits.grad, [[-1 / 3, 1 / 6, 1 / 6], [1 / 6, 1 / 6, -1 / 3]], rtol=1e-12)


@pytest.mark.parametrize("shape, to", [
    ((2, 3), (3, 2)), ((2, 3), (6,)), ((2, 3), (-1,)), ((2, 3), (4, -1)), ((2, 3), (-1, -1)), ((2, 3), (7,)),
    ((0, 3), (0, -1)), ((0, 3), (3, 0)), ((), (1, 1)), ((), ()), ((4,), (2, -2)), ((4,), (2.0, 2)),
    ((1,), (True,)), ((0,), (2**70, 0)),
])
def test_the_engine_s_reshape_rule_is_numpy_s(shape, to):
    """checks.reshape_error states NumPy's rule instead of trying it on an array; NumPy is the oracle, except
    that a negative entry other than -1, which NumPy reads as -1, is refused, as PyTorch refuses it."""
    from haaw.engine import checks

    try:
        np.empty(shape).reshape(to)
        fits = not any(isinstance(n, int) and n < -1 for n in to)
    except (TypeError, ValueError):
        fits = False
    assert (checks.reshape_error(shape, to) is None) == fits


def test_python_s_protocols_answer_as_pytorch_does():
    """list() of a 0-d tensor once gave [], and `1.0 in x` was False for an x holding 1.0 (an identity search)."""
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(Tensor(3.0))
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(Tensor(3.0))
    x = Tensor([[1.0, 2.0], [3.0, 4.0]])
    assert [row.data.tolist() for row in x] == [[1.0, 2.0], [3.0, 4.0]]
    assert 1.0 in Tensor([1.0, 2.0]) and 5.0 not in Tensor([1.0, 2.0]) and Tensor(2.0) in x


def test_requires_grad_false_on_a_computed_tensor_is_refused_with_detach_named():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(RuntimeError, match="Use x.detach\\(\\)"):
        y.requires_grad_(False)
    x.requires_grad_(False)  # a leaf may switch off
    assert not x.requires_grad


def test_comparisons_are_elementwise_as_in_pytorch_and_hashing_stays_by_identity():
    """Tensor([1.]) == 1 was False (identity), without error; torch compares entry by entry."""
    torch = pytest.importorskip("torch")
    data, other = np.array([1.0, 2.0, 3.0]), np.array([1.0, 5.0, 3.0])
    x, tx = Tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    cases = {"x == 1": (x == 1, tx == 1), "1 == x": (1 == x, 1 == tx), "x != y": (x != Tensor(other), tx != torch.tensor(other)),
             "x < 2": (x < 2, tx < 2), "x <= 2": (x <= 2, tx <= 2), "x > 2": (x > 2, tx > 2), "x >= 2": (x >= 2, tx >= 2),
             "np.float64(2) < x": (np.float64(2) < x, tx > 2), "array == x": (other == x, torch.tensor(other) == tx)}
    for what, (ours, theirs) in cases.items():
        assert isinstance(ours, Tensor) and ours.dtype == np.bool_ and not ours.requires_grad, what
        np.testing.assert_array_equal(ours.data, theirs.numpy(), err_msg=what)
    assert bool((x > 0).all()) and not bool((x > 2).all()) and bool((x > 2).any())
    assert (x == "a") is False and (x != "a") is True  # not a number: Python's own answer, as torch gives
    assert {x: 1}[x] == 1 and [x, x].index(x) == 0 and hash(x) == object.__hash__(x)
    with pytest.raises(RuntimeError, match="ambiguous"):
        [Tensor(data), x].index(x)  # list.index asks ==, and so for a tensor of three entries, torch's error too


def test_stack_refuses_what_torch_refuses_and_says_why():
    a, b = Tensor(np.ones((2, 3))), Tensor(np.ones((3, 2)))
    with pytest.raises(ValueError, match="same shape"):
        stack([a, b])
    with pytest.raises(IndexError, match="from -3 to 2"):
        stack([a, a], dim=3)
    with pytest.raises(TypeError, match="one tensor"):
        stack(a)
    assert stack([a, a], dim=-1).shape == (2, 3, 2) and stack([a, a]).shape == (2, 2, 3)


# --- register_hook (tests/test_differential.py compares random programs with hooks to torch) --------------------
def test_a_hook_is_refused_on_a_tensor_that_does_not_require_grad_with_torch_s_words():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        Tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="function of the gradient"):
        Tensor([1.0], requires_grad=True).register_hook(2.0)


def test_a_leaf_s_hook_sees_one_pass_s_gradient_and_the_leaf_accumulates_what_it_returns():
    x = Tensor([1.0, 2.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.copy()) or g * 10)
    (x * 3.0).sum().backward()
    (x * 3.0).sum().backward()
    assert [s.tolist() for s in seen] == [[3.0, 3.0], [3.0, 3.0]]  # not the 33 accumulated in between
    assert x.grad.tolist() == [60.0, 60.0]
    handle.remove()
    handle.remove()  # a second remove does nothing, as torch's
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [63.0, 63.0] and len(seen) == 2


def test_a_hook_gets_a_read_only_gradient_and_must_return_one_of_the_same_shape():
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    h.register_hook(lambda g: g.__imul__(2))  # an edit in place would change a gradient another tensor holds
    with pytest.raises(ValueError, match="read-only"):
        h.sum().backward()
    y = Tensor([1.0, 2.0], requires_grad=True)
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match=r"shape \(\) for a tensor of shape \(2,\)"):
        (y * 2.0).sum().backward()
    assert y.grad is None  # nothing half-added


def test_a_hook_may_return_a_tensor_and_is_cast_to_the_tensor_s_format():
    x = Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    x.register_hook(lambda g: Tensor(np.asarray(g, dtype=np.float64) * 2))
    (x * 1.0).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [2.0, 2.0]


def test_a_step_watcher_is_shown_the_gradient_that_reached_each_node():
    """autograd.backward's on_step (the step-through explorer's view): z = y², y = 3x at x = 2, so z sends
    dz/dz = 1 and y passes on dz/dy = 2y = 12; by hand."""
    from haaw.engine import autograd

    x = Tensor(2.0, requires_grad=True)
    y = x * 3
    z = y * y
    steps = []
    autograd.backward(z, np.array(1.0), on_step=lambda node, up, sent: steps.append((node, float(up))))
    assert [(node is z, node is y, up) for node, up in steps] == [(True, False, 1.0), (False, True, 12.0)]
    assert x.grad.item() == 36.0


def _drop_function():
    from haaw.engine.function import Function

    class Drop(Function):  # gives its input no gradient at all
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return (None,)

    return Drop


def test_a_hooked_leaf_that_this_pass_sends_nothing_keeps_what_it_held_as_in_pytorch():
    """x.grad held [5, 5] from before; this pass gives x nothing (a Function returns None for it): PyTorch leaves
    x.grad as it was, and w gets its gradient."""
    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([1.0, 1.0], requires_grad=True)
    x.grad = np.array([5.0, 5.0])
    seen = []
    x.register_hook(lambda g: seen.append(g) or (None if g is None else g * 10))
    (_drop_function().apply(x) * w).sum().backward()
    assert seen == [None]  # called, with None, as PyTorch calls it
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])
    np.testing.assert_array_equal(w.grad, [1.0, 2.0])


@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "intermediate"])
def test_a_hook_given_none_may_not_return_a_gradient_as_in_pytorch(leaf):
    """PyTorch: "can't replace a None gradient with a non-None value". A leaf keeps what it held."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    x.grad = np.array([5.0, 5.0])
    h = x if leaf else x * 3

    def makes_one_up(g):
        return np.ones(2)

    h.register_hook(makes_one_up)
    with pytest.raises(RuntimeError, match=r"the hook makes_one_up returned a gradient where it was given None.*"
                                           r"lambda g: None if g is None else"):
        _drop_function().apply(h).sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 5.0])


def test_a_hook_that_fails_leaves_its_leaf_s_earlier_gradient_as_it_was_as_in_pytorch():
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()

    def fails(g):
        raise ValueError("no")

    x.register_hook(fails)
    with pytest.raises(ValueError, match="no"):
        (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])  # PyTorch's x.grad after the same: tensor([2., 2.])


# --- var, std, where and stack against NumPy's own (ddof) and PyTorch's --------------------------------------
X24 = np.array([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 7.0, 11.0]])


@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_and_std_divide_by_n_minus_the_correction_as_numpy_s_ddof(dim, keepdim, correction):
    if dim == 0 and correction == 2:
        pytest.skip("2 rows, correction 2: N − correction = 0, below")
    x = Tensor(X24)
    expected = np.var(X24, axis=dim, ddof=correction, keepdims=keepdim)
    v, s = x.var(dim, keepdim=keepdim, correction=correction), x.std(dim, keepdim=keepdim, correction=correction)
    assert v.shape == expected.shape == s.shape
    np.testing.assert_allclose(v.data, expected, rtol=1e-13)
    np.testing.assert_allclose(s.data, np.sqrt(expected), rtol=1e-13)


def test_var_s_default_is_pytorch_s_unbiased_estimate_and_its_gradient_is_pytorch_s():
    """By hand: [1, 2, 3, 4] has mean 2.5 and squared distances 2.25 + 0.25 + 0.25 + 2.25 = 5: var 5/3, and
    d var/dx = 2(x − mean)/(N − 1)."""
    x = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    v = x.var()
    assert v.item() == pytest.approx(5 / 3, rel=1e-15)
    v.backward()
    np.testing.assert_allclose(x.grad, [-1.0, -1 / 3, 1 / 3, 1.0], rtol=1e-14)
    torch = pytest.importorskip("torch")
    t = torch.tensor(X24, requires_grad=True)
    ours = Tensor(X24, requires_grad=True)
    (t.std(dim=1, keepdim=True, correction=0) * torch.tensor([[1.0], [3.0]], dtype=torch.float64)).sum().backward()
    (ours.std(1, keepdim=True, correction=0) * Tensor([[1.0], [3.0]])).sum().backward()
    np.testing.assert_allclose(ours.grad, t.grad.numpy(), rtol=1e-12)


def test_var_of_fewer_entries_than_the_correction_is_nan_or_inf_as_pytorch_s():
    """N − correction ≤ 0: PyTorch divides by max(0, N − correction), so one entry gives 0/0 = nan and two
    entries with correction 3 give (a positive sum)/0 = inf. Both warn, as PyTorch's ("degrees of freedom is <= 0")."""
    with pytest.warns(RuntimeWarning):
        assert np.isnan(Tensor([5.0]).var().item())
    with pytest.warns(RuntimeWarning):
        assert Tensor([1.0, 2.0]).var(correction=3).item() == np.inf
    with pytest.warns(RuntimeWarning):
        assert Tensor(X24).var(0, correction=2).data.tolist() == [np.inf] * 4


@pytest.mark.parametrize("pick", ["tensors", "number_first", "number_second", "mask_tensor"])
def test_where_picks_entries_and_sends_each_side_the_gradient_of_its_own_entries(pick):
    """torch.where's values and gradients, by hand: the condition [True, False, True] over a = [1, 2, 3] and
    b = [10, 20, 30] (or a number in place of one)."""
    from haaw.engine import where

    mask = np.array([True, False, True])
    a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([10.0, 20.0, 30.0], requires_grad=True)
    if pick == "tensors":
        out, want = where(mask, a, b), [1.0, 20.0, 3.0]
    elif pick == "number_first":
        out, want = where(mask, 7.0, b), [7.0, 20.0, 7.0]
    elif pick == "number_second":
        out, want = where(mask, a, 7.0), [1.0, 7.0, 3.0]
    else:
        out, want = where(Tensor(mask), a, b), [1.0, 20.0, 3.0]
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.data, want)
    (out * Tensor([1.0, 2.0, 4.0])).sum().backward()
    if pick != "number_first":
        np.testing.assert_array_equal(a.grad, [1.0, 0.0, 4.0])
    if pick != "number_second":
        np.testing.assert_array_equal(b.grad, [0.0, 2.0, 0.0])


def test_where_of_two_numbers_and_of_a_float32_tensor_keeps_pytorch_s_formats():
    from haaw.engine import where

    mask = np.array([True, False])
    both = where(mask, 1.0, 2.0)
    assert both.dtype == np.float64 and both.data.tolist() == [1.0, 2.0]
    narrow = where(mask, Tensor(np.array([1.0, 2.0], dtype=np.float32)), 0.5)
    assert narrow.dtype == np.float32 and narrow.data.tolist() == [1.0, 0.5]  # torch.where: float32 too


@pytest.mark.parametrize("dim, shape", [(0, (2, 2, 3)), (1, (2, 2, 3)), (2, (2, 3, 2)), (-1, (2, 3, 2)),
                                        (-3, (2, 2, 3))])
def test_stack_puts_each_tensor_at_its_index_on_the_new_axis_and_hands_back_its_gradient(dim, shape):
    a = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    b = Tensor(np.arange(6.0).reshape(2, 3) + 100, requires_grad=True)
    out = stack([a, b], dim=dim)
    assert out.shape == shape
    np.testing.assert_array_equal(np.take(out.data, 0, axis=dim), a.data)
    np.testing.assert_array_equal(np.take(out.data, 1, axis=dim), b.data)
    weights = np.arange(12.0).reshape(shape)
    (out * Tensor(weights)).sum().backward()
    np.testing.assert_array_equal(a.grad, np.take(weights, 0, axis=dim))
    np.testing.assert_array_equal(b.grad, np.take(weights, 1, axis=dim))


def test_stack_takes_arrays_and_lists_and_refuses_what_torch_refuses_with_the_whole_message():
    assert stack([np.ones(2), [2.0, 3.0]]).data.tolist() == [[1.0, 1.0], [2.0, 3.0]]
    with pytest.raises(TypeError) as err:
        stack(np.ones((2, 2)))
    assert str(err.value) == "stack: takes a list or tuple of tensors, as in PyTorch; got one tensor (write stack([a, b]))"
    with pytest.raises(ValueError) as err:
        stack([])
    assert str(err.value) == "stack: needs at least one tensor"
    with pytest.raises(ValueError) as err:
        stack([Tensor([1.0]), Tensor([1.0, 2.0])])
    assert str(err.value) == "stack: every tensor must have the same shape; got [(1,), (2,)]"
    for dim in (3, -4):
        with pytest.raises(IndexError) as err:
            stack([Tensor(np.ones((2, 3)))] * 2, dim=dim)
        assert str(err.value) == f"stack: dim {dim} is out of range for tensors of 2 dimensions (from -3 to 2)"


# --- every refusal of engine/tensor.py by its whole message, and the small paths mutmut found untested ---------
def _message_of(error, call):
    with pytest.raises(error) as err:
        call()
    return str(err.value)


def test_the_refusals_of_tensor_s_methods_say_their_whole_message():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    assert _message_of(RuntimeError, lambda: y.requires_grad_(False)) == (
        "requires_grad_(False) on a tensor computed from others: its gradient flows back whatever its flag says. "
        "Use x.detach() for the same numbers without the graph (PyTorch refuses this too)")
    assert _message_of(RuntimeError, lambda: Tensor([1.0]).register_hook(lambda g: g)) == (
        "cannot register a hook on a tensor that doesn't require gradient (as PyTorch says): no gradient will ever "
        "reach it. Make the leaf with requires_grad=True, or register the hook on a tensor computed from one")
    assert _message_of(ValueError, lambda: x.clamp()) == "clamp: give min, max or both (as PyTorch asks)"
    assert _message_of(TypeError, lambda: len(Tensor(1.0))) == "len() of a 0-d tensor: it holds one number, x.item()"
    assert _message_of(TypeError, lambda: iter(Tensor(1.0))) == (
        "iteration over a 0-d tensor: it holds one number, x.item()")
    assert _message_of(RuntimeError, lambda: bool(Tensor([1.0, 2.0]))) == (
        "the truth value of a tensor of shape (2,) is ambiguous: use (x > 0).any() or .all(), or compare one entry")
    assert _message_of(TypeError, lambda: np.asarray(x)) == (
        "NumPy was given a Tensor that requires a gradient: NumPy cannot record it in the graph. Use the Tensor's "
        "own operations, or pass t.detach().numpy() for a plain array.")


def test_in_place_refusals_name_the_operator_and_what_to_write_instead():
    x = Tensor([1.0, 2.0], requires_grad=True)

    def sub():
        x.__isub__(1.0)

    def put():
        x[0] = 5.0

    assert _message_of(RuntimeError, sub) == (
        "x -= ...: in-place change of a tensor that requires a gradient; backward may need its old value. Write "
        "y = x - ... instead (or use no_grad() for an update).")
    assert _message_of(RuntimeError, put) == (
        "x[...] = ...: in-place change of a tensor that requires a gradient; backward may need its old value. Write "
        "a new tensor (e.g. cat the pieces) instead (or use no_grad() for an update).")


def test_max_refuses_numpy_s_extras_both_spellings_of_dim_and_an_empty_tensor_by_name():
    x = Tensor([1.0, 2.0])
    assert _message_of(TypeError, lambda: x.max(dtype=np.float32)) == (
        "max: haaw takes no dtype= or out= (convert with .to(dtype) first)")
    assert _message_of(TypeError, lambda: x.max(out=np.zeros(()))) == (
        "max: haaw takes no dtype= or out= (convert with .to(dtype) first)")
    assert _message_of(TypeError, lambda: x.max(dim=0, axis=0)) == (
        "max: pass dim= or axis=, not both (they are the same thing)")
    assert _message_of(RuntimeError, lambda: Tensor(np.zeros(0)).max()) == (
        "max() of an empty tensor (shape (0,)): the largest of no numbers has no value. PyTorch refuses it too; "
        "give dim= to reduce over an axis that is not empty")
    assert _message_of(IndexError, lambda: Tensor(np.zeros((2, 0))).max(dim=1)) == (
        "max(dim=1) over an axis of length 0 (shape (2, 0)): the largest of no numbers has no value. PyTorch "
        "refuses it too; check the shape, or reduce over another axis")


def test_making_a_tensor_refuses_what_torch_tensor_and_torch_from_numpy_refuse_with_the_whole_message():
    assert _message_of(TypeError, lambda: tensor([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])])) == (
        "tensor(): a list holding a tensor of shape (2,): each tensor in the list stands for one number, as in "
        "PyTorch. To join tensors into one, write haaw.stack([a, b]) (a new axis) or haaw.cat([a, b])")
    assert _message_of(TypeError, lambda: from_numpy([1.0, 2.0])) == (
        "from_numpy: expected a NumPy array, got list")
    assert _message_of(TypeError, lambda: from_numpy(np.array(["a"]))) == (
        "Tensor holds numbers; got an array of dtype <U1")
    # ragged lists with no tensor in them: the engine's own words, not NumPy's ValueError
    assert _message_of(TypeError, lambda: Tensor([[1.0, 2.0], [3.0]])).startswith(
        "Tensor needs numbers in a regular shape; got list: ")


def test_tensor_takes_its_dtype_and_conversions_give_their_format():
    assert tensor([1, 2], dtype=np.float32).dtype == np.float32
    assert tensor([1, 2], dtype=np.float32, requires_grad=True).requires_grad
    assert Tensor([1, 2]).double().dtype == np.float64 and Tensor([1.0], dtype=np.float16).double().dtype == np.float64
    assert Tensor([1.5]).bfloat16().dtype.name == "bfloat16" and Tensor([1.5]).bfloat16().item() == 1.5


def test_numpy_reads_a_tensor_in_its_own_format_or_in_the_one_asked_for():
    x = Tensor(np.array([1.5, 2.5], dtype=np.float32))
    assert np.asarray(x).dtype == np.float32
    as64 = np.asarray(x, dtype=np.float64)
    assert as64.dtype == np.float64 and as64.tolist() == [1.5, 2.5]


def test_log_softmax_takes_numpy_s_axis_for_dim():
    x = Tensor([[0.0, 1.0], [2.0, 4.0]])
    np.testing.assert_array_equal(x.log_softmax(axis=0).data, x.log_softmax(dim=0).data)
    assert not np.allclose(x.log_softmax(axis=0).data, x.log_softmax(dim=1).data)


def test_a_number_matrix_multiplied_by_a_tensor_is_refused_as_a_shape_error():
    with pytest.raises(ValueError, match="matmul"):
        2.0 @ Tensor(np.ones((2, 2)))


def test_writing_one_entry_changes_that_entry_alone():
    x = Tensor([1.0, 2.0, 3.0])
    x[1] = 5.0
    assert x.data.tolist() == [1.0, 5.0, 3.0]


def test_a_second_hook_runs_after_one_that_returns_none_and_a_hook_may_return_a_tensor_that_requires_grad():
    x = Tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: None)  # leaves the gradient as it is: the next hook still runs (PyTorch's order)
    x.register_hook(lambda g: Tensor(np.asarray(g) * 3, requires_grad=True))
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad, [6.0, 6.0])


def test_a_hook_of_the_wrong_shape_is_named_in_the_refusal_by_its_name_or_what_it_prints_as():
    class Summing:
        def __call__(self, g):
            return g.sum()

        def __str__(self):
            return "the summing hook"

    def summing(g):
        return g.sum()

    for hook, name in ((summing, "summing"), (Summing(), "the summing hook")):
        x = Tensor([1.0, 2.0], requires_grad=True)
        x.register_hook(hook)
        assert _message_of(RuntimeError, lambda x=x: (x * 2).sum().backward()) == (
            f"the hook {name} returned a gradient of shape () for a tensor of shape (2,): return one of the same "
            "shape, or None to leave the gradient as it is (PyTorch refuses this too)")


def test_a_removed_hook_leaves_room_for_new_ones_and_its_with_block_lets_errors_through():
    x = Tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 10).remove()
    x.register_hook(lambda g: g * 3)
    (x * 1).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])
    with pytest.raises(KeyError):
        with x.register_hook(lambda g: g):
            raise KeyError("through")


def test_a_multi_row_tensor_prints_its_rows_aligned_under_the_first():
    assert repr(Tensor([[1.0, 2.0], [3.0, 4.0]])) == "Tensor([[1., 2.],\n        [3., 4.]])"


@pytest.mark.parametrize("dtype, write, value, wanted", [
    (np.int64, "__iadd__", 0.5, "floats"), (np.int64, "__itruediv__", 2, "floats"),
    (np.bool_, "__iadd__", 1, "integers"), (np.float64, "__iadd__", 1j, "complex numbers"),
    (np.int32, "__imul__", 1.5, "floats"), (np.int32, "__isub__", np.array([0.5]), "floats"),
])
def test_an_in_place_write_of_a_wider_kind_is_refused_naming_the_kind(dtype, write, value, wanted):
    """PyTorch refuses int_t += 0.5, int_t /= 2, bool_t += 1 and float_t += 1j: the result cannot be written back
    without cutting it. The message names the operator, the result's kind and what to write instead."""
    op, plain = {"__iadd__": ("+=", "+"), "__isub__": ("-=", "-"), "__imul__": ("*=", "*"),
                 "__itruediv__": ("/=", "/")}[write]
    x = Tensor(np.zeros(1, dtype=dtype))
    assert _message_of(RuntimeError, lambda: getattr(x, write)(value)) == (
        f"x {op} ...: the result is {wanted}, which cannot be written back into this {np.dtype(dtype)} tensor "
        f"without cutting it (PyTorch refuses it too). Write y = x {plain} ... instead: a new tensor, of the "
        "result's type.")


@pytest.mark.parametrize("write, op, plain", [("__iadd__", "+=", "+"), ("__imul__", "*=", "*"),
                                              ("__itruediv__", "/=", "/")])
def test_every_in_place_operator_names_itself_when_refused(write, op, plain):
    x = Tensor([1.0, 2.0], requires_grad=True)
    assert _message_of(RuntimeError, lambda: getattr(x, write)(2.0)) == (
        f"x {op} ...: in-place change of a tensor that requires a gradient; backward may need its old value. Write "
        f"y = x {plain} ... instead (or use no_grad() for an update).")
    plain_x = Tensor([1.0, 2.0])
    assert _message_of(RuntimeError, lambda: getattr(plain_x, write)(x)) == (
        f"x {op} ...: the value written requires a gradient, and haaw does not record in-place writes, so its "
        f"gradient would be lost. Write y = x {plain} ... instead (or write value.detach() if no gradient should "
        "flow).")


def test_in_place_arithmetic_in_float64_uses_the_number_as_given():
    """x += 0.1 on a float64 tensor adds the float64 0.1 (a float16 tensor computes in float32, rounded once)."""
    x = Tensor([1.0, 2.0])
    x += 0.1
    x /= 2
    assert x.data.tolist() == [(1.0 + 0.1) / 2, (2.0 + 0.1) / 2]


def test_changed_in_place_counts_one_version_as_an_in_place_operator_does():
    from haaw.engine.tensor import changed_in_place

    x = Tensor([1.0])
    start = x._version
    x += 1.0
    assert x._version == start + 1  # PyTorch's _version: one per in-place change
    changed_in_place(x)
    assert x._version == start + 2


def test_numpy_s_other_ufunc_methods_and_out_are_refused_whole():
    x = Tensor([1.0, 2.0])
    refusal = ("np.add cannot record a Tensor in the graph. Use the Tensor's own operations, or pass "
               "t.detach().numpy() for a plain array.")
    assert _message_of(TypeError, lambda: np.add.reduce(x)) == refusal
    assert _message_of(TypeError, lambda: np.add(x, 1.0, out=np.zeros(2))) == refusal


def test_an_exponent_or_a_hook_of_the_wrong_type_is_named_by_its_type():
    x = Tensor([1.0], requires_grad=True)
    assert _message_of(TypeError, lambda: x ** [2]) == (
        "Tensor ** exponent: the exponent must be a plain number, got list")
    assert _message_of(TypeError, lambda: x.register_hook(2.0)) == (
        "register_hook: expected a function of the gradient, got float")


def test_cat_refuses_what_torch_cat_refuses_with_the_whole_message():
    assert _message_of(TypeError, lambda: cat(Tensor(np.ones((2, 2))))) == (
        "cat: takes a list or tuple of tensors, as in PyTorch; got one tensor (write cat([a, b]))")
    assert _message_of(ValueError, lambda: cat([])) == "cat: needs at least one tensor"
    assert _message_of(IndexError, lambda: cat([Tensor([1.0]), Tensor([2.0])], dim=1)) == (
        "cat: dim 1 is out of range for a tensor of shape (1,) (expected an integer from -1 to 0)")
    assert cat([[1.0], np.array([2.0])]).data.tolist() == [1.0, 2.0]  # lists and arrays become tensors


def test_sum_mean_and_transpose_name_themselves_in_their_refusals():
    x = Tensor(np.ones((2, 3)))
    for name, call in (("sum", x.sum), ("mean", x.mean)):  # dtype= they take, as PyTorch's (test_habits)
        assert _message_of(TypeError, lambda call=call: call(out=np.zeros(3))) == (
            f"{name}: haaw takes no out= (every result is a new tensor)")
    assert _message_of(TypeError, lambda: x.mean(dim=0, axis=0)) == (
        "mean: pass dim= or axis=, not both (they are the same thing)")
    for dims in ((5, 0), (0, 5)):
        assert _message_of(IndexError, lambda dims=dims: x.transpose(*dims)) == (
            "transpose: dim 5 is out of range for a tensor of shape (2, 3) (expected an integer from -2 to 1)")


@pytest.mark.parametrize("base", [0.0, -1.0, True])
def test_a_base_that_is_not_a_positive_number_is_refused_whole(base):
    assert _message_of(TypeError, lambda: base ** Tensor([1.0, 2.0])) == (
        f"number ** Tensor: haaw takes a positive number as the base, got {base!r}")


def test_a_float_base_over_an_integer_tensor_gives_floats_as_pytorch():
    """torch.tensor([1, 2]) gives 2.0 ** it as [2., 4.] in floats; haaw's in float64, its default."""
    powers = 2.0 ** Tensor([1, 2, -1])
    assert powers.dtype == np.float64 and powers.data.tolist() == [2.0, 4.0, 0.5]


def test_a_tensor_times_a_number_as_a_matrix_is_refused_as_a_shape_error():
    with pytest.raises(ValueError, match="matmul"):
        Tensor(np.ones((2, 2))) @ 2.0


def test_an_all_at_once_backward_may_return_one_bare_array_for_one_input_and_a_wrong_count_is_refused():
    from haaw.engine.ops import Op

    x = Tensor([1.0, 2.0], requires_grad=True)
    apply(Op("doubling", lambda ctx, a: a * 2, vjp_all=lambda ctx, g: g * 2), x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2.0, 2.0])
    y = Tensor([1.0, 2.0], requires_grad=True)
    wrong = apply(Op("doubling", lambda ctx, a: a * 2, vjp_all=lambda ctx, g: (g, g)), y).sum()
    assert _message_of(ValueError, wrong.backward) == (
        "the backward of 'doubling' returned 2 gradient(s) for 1 input(s): return one per input (None where there "
        "is none)")


def test_subtraction_with_a_bool_on_either_side_is_refused_as_pytorch_refuses_it():
    refusal = ("subtraction with a bool tensor: PyTorch refuses it too. Convert it to numbers first: "
               "mask.to(np.int64) - 1")
    for call in (lambda: Tensor([1.0]) - True, lambda: True - Tensor([1.0]),
                 lambda: Tensor([1.0]) - Tensor([True]), lambda: Tensor([True]) - 1):
        assert _message_of(RuntimeError, call) == refusal


def test_writing_a_float_into_an_integer_tensor_by_index_truncates_as_pytorch():
    """t = torch.tensor([1, 2]); t[0] = 2.5 gives tensor([2, 2]): assignment casts, where x += 0.5 is refused."""
    x = Tensor([1, 2])
    x[0] = 2.5
    assert x.dtype == np.int64 and x.data.tolist() == [2, 2]


def test_a_write_of_an_unsigned_or_a_non_number_kind_is_named_in_the_refusal():
    flags = Tensor(np.array([True, False]))
    assert _message_of(RuntimeError, lambda: flags.__iadd__(np.array([1, 0], dtype=np.uint8))) == (
        "x += ...: the result is integers, which cannot be written back into this bool tensor without cutting it "
        "(PyTorch refuses it too). Write y = x + ... instead: a new tensor, of the result's type.")
    x = Tensor([1.0])
    assert _message_of(RuntimeError, lambda: x.__iadd__(np.array(["a"]))) == (
        "x += ...: the result is <U1, which cannot be written back into this float64 tensor without cutting it "
        "(PyTorch refuses it too). Write y = x + ... instead: a new tensor, of the result's type.")


def test_where_with_a_number_first_takes_the_tensor_s_format_and_a_list_for_the_condition():
    """torch.where(mask, 0.5, float32 tensor) is float32: the number takes the tensor's format."""
    from haaw.engine import where

    out = where(np.array([True, False]), 0.5, Tensor(np.array([1.0, 2.0], dtype=np.float32)))
    assert out.dtype == np.float32 and out.data.tolist() == [0.5, 2.0]
    assert where([True, False], Tensor([1.0, 2.0]), 0.0).data.tolist() == [1.0, 0.0]


def test_std_s_defaults_and_var_s_refusal_by_name():
    x = Tensor([1.0, 2.0, 3.0, 4.0])
    assert x.std().item() == pytest.approx((5 / 3) ** 0.5, rel=1e-15) and x.std().shape == ()
    assert x.std(0).shape == () and x.std(0, True, True).shape == (1,)  # PyTorch's order: dim, unbiased, keepdim
    assert _message_of(IndexError, lambda: Tensor([1.0, 2.0]).var(dim=5)) == (
        "var: dim 5 is out of range for a tensor of shape (2,) (expected an integer from -1 to 0)")


@pytest.mark.parametrize("op", ["__iadd__", "__isub__", "__imul__"])
def test_a_signed_tensor_written_into_an_unsigned_one_in_place_wraps_round_as_pytorch_s(op):
    """uint8 += int8: the result type, int16, is cut back into uint8 (1 − 3 is 254), as PyTorch does; only a wider
    kind (floats into integers) is refused."""
    torch = pytest.importorskip("torch")
    mine = Tensor(np.array([1, 2, 200], dtype=np.uint8))
    theirs = torch.tensor([1, 2, 200], dtype=torch.uint8)
    getattr(mine, op)(Tensor(np.array([-3, 1, 100], dtype=np.int8)))
    getattr(theirs, op)(torch.tensor([-3, 1, 100], dtype=torch.int8))
    assert mine.dtype == np.uint8
    np.testing.assert_array_equal(mine.data, theirs.numpy())
