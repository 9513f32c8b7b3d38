"""Every operation of the table in haaw/engine/ops.py: its forward against a closed form written here in plain
NumPy, and the cases where an operation's gradient is easy to get wrong (ties, casts, empty batches, huge or
tiny numbers, 16-bit formats). Random shapes and broadcasting, against finite differences and PyTorch:
test_ops_random_shapes.py (it needs hypothesis; this file needs only pytest, numpy and ml_dtypes)."""
import numpy as np
import pytest

from haaw.engine.ops import OPS, unbroadcast
from haaw.engine.tensor import Tensor, apply, cat


@pytest.mark.parametrize("g_shape, shape, expected", [
    ((4, 3), (4, 3), np.ones((4, 3))),
    ((4, 3), (3,), np.full(3, 4.0)),
    ((4, 3), (1, 3), np.full((1, 3), 4.0)),
    ((4, 3), (4, 1), np.full((4, 1), 3.0)),
    ((2, 4, 3), (), np.array(24.0)),
    ((0, 3), (1, 3), np.zeros((1, 3))),  # stretched over an empty batch: nothing to add up
])
def test_unbroadcast_sums_over_what_broadcasting_stretched(g_shape, shape, expected):
    np.testing.assert_array_equal(unbroadcast(np.ones(g_shape), shape), expected)


# --- forward values against closed forms written here, so that they are checked without torch ---------
def _np_softmax(x, dim):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


FORWARD = {  # name -> (haaw function of Tensors, the same thing in plain NumPy, input arrays)
    "add": (lambda a, b: a + b, np.add, [[1.0, 2.0], [[10.0], [20.0]]]),
    "sub": (lambda a, b: a - b, np.subtract, [[1.0, 2.0], [0.5, 4.0]]),
    "mul": (lambda a, b: a * b, np.multiply, [[1.0, -2.0], [3.0]]),
    "div": (lambda a, b: a / b, np.divide, [[1.0, -2.0], [4.0, 8.0]]),
    "pow": (lambda a: a**3, lambda a: a * a * a, [[1.5, -2.0, 0.0]]),
    "neg": (lambda a: -a, lambda a: 0 - a, [[1.5, -2.0]]),
    "matmul": (lambda a, b: a @ b, lambda a, b: np.einsum("ij,jk->ik", a, b), [[[1.0, 2.0]], [[3.0], [4.0]]]),
    "linear": (lambda x, w, b: apply("linear", x, w, b), lambda x, w, b: np.einsum("ij,jk->ik", x, w) + b,
               [[[1.0, 2.0], [3.0, 4.0]], [[1.0, 0.0, -1.0], [2.0, 1.0, 0.5]], [10.0, 20.0, 30.0]]),
    "exp": (lambda a: a.exp(), lambda a: np.e ** a, [[0.0, 1.0, -1.0]]),
    "log": (lambda a: a.log(), lambda a: np.log2(a) / np.log2(np.e), [[1.0, np.e, 0.5]]),
    "tanh": (lambda a: a.tanh(), lambda a: (np.e ** (2 * a) - 1) / (np.e ** (2 * a) + 1), [[0.0, 0.5, -2.0]]),
    "relu": (lambda a: a.relu(), lambda a: a * (a > 0), [[-1.0, 0.0, 2.0]]),
    "sigmoid": (lambda a: a.sigmoid(), lambda a: 1 / (1 + np.e ** -a), [[0.0, 3.0, -3.0, -80.0]]),
    "sum": (lambda a: a.sum(dim=0), lambda a: a[0] + a[1], [[[1.0, 2.0], [3.0, 4.0]]]),
    "mean": (lambda a: a.mean(dim=1), lambda a: (a[:, 0] + a[:, 1]) / 2, [[[1.0, 2.0], [3.0, 5.0]]]),
    "max": (lambda a: a.amax(dim=-1), lambda a: np.where(a[:, 0] > a[:, 1], a[:, 0], a[:, 1]),
            [[[1.0, 2.0], [5.0, 3.0]]]),
    "min": (lambda a: a.amin(dim=-1), lambda a: np.where(a[:, 0] < a[:, 1], a[:, 0], a[:, 1]),
            [[[1.0, 2.0], [5.0, 3.0]]]),
    "reshape": (lambda a: a.reshape(3, 2), lambda a: np.array([[a[0, 0], a[0, 1]], [a[0, 2], a[1, 0]],
                                                             [a[1, 1], a[1, 2]]]), [[[1.0, 2, 3], [4, 5, 6]]]),
    "permute": (lambda a: a.transpose(0, -1), lambda a: np.array([[a[j, i] for j in range(2)] for i in range(3)]),
                [[[1.0, 2, 3], [4, 5, 6]]]),
    "cast": (lambda a: a.half(), lambda a: a.astype(np.float16), [[1.0, 1 / 3, 65504.0, 1e-8]]),
    "getitem": (lambda a: a[1, ::2], lambda a: np.array([a[1, 0], a[1, 2]]), [[[1.0, 2, 3], [4, 5, 6]]]),
    "cat": (lambda a, b: cat([a, b], dim=-1), lambda a, b: np.array([[a[0, 0], b[0, 0], b[0, 1]]]),
            [[[1.0]], [[2.0, 3.0]]]),
    "clamp": (lambda a: a.clamp(-1.0, 2.0), lambda a: np.array([-1.0, 0.5, 2.0, -1.0]), [[-3.0, 0.5, 2.5, -1.0]]),
    "where": (lambda a, b: apply("where", a, b, condition=np.array([True, False, True])),
              lambda a, b: np.array([a[0], b[1], a[2]]), [[1.0, 2.0, 3.0], [-1.0, -2.0, -3.0]]),
    "softmax": (lambda a: a.softmax(-1), lambda a: np.e ** a / (np.e ** a).sum(), [[0.0, np.log(3.0)]]),
    "log_softmax": (lambda a: a.log_softmax(-1), lambda a: a - np.log((np.e ** a).sum()), [[0.0, np.log(3.0)]]),
    "masked_softmax": (lambda a: apply("masked_softmax", a, mask=np.array([[True, False, True], [False] * 3]), dim=-1),
                       lambda a: np.array([[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]]), [[[0.0, 9.0, np.log(3.0)], [1, 2, 3]]]),
    "cross_entropy_rows": (lambda a: apply("cross_entropy_rows", a, targets=np.array([1])),
                           lambda a: np.array([np.log(4.0)]), [[[0.0, 0.0, np.log(2.0)]]]),
}


def test_every_operation_has_a_forward_oracle():
    assert set(FORWARD) == set(OPS)


@pytest.mark.parametrize("name", sorted(FORWARD))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_forward_matches_a_closed_form(name, dtype):
    ours, closed_form, inputs = FORWARD[name]
    arrays = [np.array(x, dtype=dtype) for x in inputs]
    out = ours(*(Tensor(a) for a in arrays))
    expected = closed_form(*(a.astype(np.float64) for a in arrays))
    assert out.dtype == (np.float16 if name == "cast" else dtype)
    np.testing.assert_allclose(out.data, expected, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-12)


@pytest.mark.parametrize("what", ["max", "min"])
def test_max_and_amax_share_the_gradient_equally_between_ties(what):
    """x.max() and x.amax(dim), as PyTorch's; x.max(dim) gives it all to the index it returns (test_differential)."""
    sign = 1.0 if what == "max" else -1.0
    x = Tensor(sign * np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    getattr(x, "a" + what)(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    y = Tensor(sign * np.array([1.0, 4.0, 4.0]), requires_grad=True)
    getattr(y, what)().backward()
    np.testing.assert_array_equal(y.grad, [0.0, 0.5, 0.5])


def test_the_engine_calls_only_the_vjps_of_inputs_that_need_a_gradient():
    calls = []
    op = OPS["mul"]
    original = op.vjps
    def counted(i, vjp):
        def vjp_that_counts(ctx, g):
            calls.append(i)
            return vjp(ctx, g)
        return vjp_that_counts

    op.vjps = tuple(counted(i, vjp) for i, vjp in enumerate(original))
    try:
        x, w = Tensor(np.ones(3)), Tensor(np.ones(3), requires_grad=True)
        (x * w).sum().backward()
    finally:
        op.vjps = original
    assert calls == [1]


@pytest.mark.parametrize("to", [np.float16, np.float32, "bfloat16"])
def test_a_cast_passes_the_gradient_back_in_the_input_s_format(to):
    x = Tensor(np.array([0.1, -2.0, 3.5]), requires_grad=True)
    y = x.to(to)
    assert y.dtype == (np.dtype(to) if to != "bfloat16" else y.dtype) and y.dtype.itemsize < 8
    (y * 2.0).sum().backward()
    assert x.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])
    assert x.float().dtype == np.float32 and x.half().dtype == np.float16 and x.double() is x
    with pytest.raises(TypeError, match="not a number format"):
        x.to("float12")


def test_integer_sums_and_matrix_products_are_exact_not_rounded_through_float32():
    big = 2**24 + 1  # the first integer float32 cannot hold
    total = Tensor(np.full(3, big, dtype=np.int32)).sum()
    assert total.item() == 3 * big and total.dtype == np.int64  # PyTorch's sum of int32 is int64 too
    product = Tensor(np.array([[big, 1]], dtype=np.int32)) @ Tensor(np.array([[1], [1]], dtype=np.int32))
    assert product.dtype == np.int32 and product.item() == big + 1


def test_a_row_sum_over_an_empty_batch_has_an_empty_gradient():
    x = Tensor(np.zeros((0, 3)), requires_grad=True)
    x.sum(dim=1).backward(np.zeros(0))
    assert x.grad.shape == (0, 3)


def test_cat_of_three_tensors_gives_each_its_own_slice_of_the_gradient():
    a, b, c = (Tensor(np.zeros((2, n)), requires_grad=True) for n in (1, 2, 3))
    g = np.arange(12.0).reshape(2, 6)
    cat([a, b, c], dim=1).backward(g)
    np.testing.assert_array_equal(a.grad, g[:, :1])
    np.testing.assert_array_equal(b.grad, g[:, 1:3])
    np.testing.assert_array_equal(c.grad, g[:, 3:])


def test_masked_softmax_of_huge_scores_is_finite_and_exact():
    scores = np.array([[1000.0, 5.0, 1000.0 + np.log(3.0)], [3.0, 3.0, 7.0]])
    mask = np.array([[True, False, True], [True, True, False]])
    out = apply("masked_softmax", Tensor(scores), mask=mask, dim=-1)
    np.testing.assert_allclose(out.data, [[0.25, 0.0, 0.75], [0.5, 0.5, 0.0]], rtol=1e-12)


X = np.array([[1.0, 5.0, 2.0], [4.0, 0.0, 6.0]])
X3 = np.stack([X, X[::-1] / 2])  # three axes, so that "the last" differs from the second


@pytest.mark.parametrize("name, inputs, expected", [
    ("sum", [X], 18.0),  # reductions: over every axis, no axis kept
    ("mean", [X], 3.0),
    ("max", [X], 6.0),
    ("min", [X], 0.0),
    ("cat", [X, X[:1]], np.concatenate([X, X[:1]], axis=0)),  # along the first axis
    ("log_softmax", [X3], X3 - np.log(np.exp(X3).sum(axis=2, keepdims=True))),  # along the last axis
])
def test_the_table_s_functions_called_with_their_defaults_act_like_pytorch_s(name, inputs, expected):
    from haaw.engine.ops import Context

    out = OPS[name].forward(Context(), *inputs)
    assert np.shape(out) == np.shape(expected)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_division_s_gradient_neither_underflows_nor_loses_digits_in_float16():
    a, b = Tensor(1e-200, requires_grad=True), Tensor(1e-200, requires_grad=True)
    (a / b).backward()
    assert b.grad == pytest.approx(-1e200, rel=1e-12)  # -a / b², formed without b² (which is 0 here)
    for value in (5e-3, 2e-3, 7e-4):  # b² is subnormal in fp16 below about 8e-3
        a, b = Tensor(np.float16(1e-4), requires_grad=True), Tensor(np.float16(value), requires_grad=True)
        (a / b).backward()
        exact = -float(np.float16(1e-4)) / float(np.float16(value)) ** 2
        assert abs(float(b.grad) - exact) <= 2e-3 * abs(exact)  # fp16's own rounding, not 1%


def test_relu_passes_the_gradient_of_a_nan_on_as_pytorch_does():
    x = Tensor(np.array([np.nan, -1.0, 2.0]), requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0, 0.0, 1.0])


# --- defvjp, called again at run time (the table's own calls run at import, before any test can watch them) ----
REFUSED_VJP = ("it calls a vector-Jacobian product from the engine's table of operations, which computes what this "
               "code is meant to compute. Calling it is not writing it (and from inside the engine it would call "
               "your function again): compute the result from the inputs you are given")


def test_defvjp_registers_an_operation_under_its_name_and_each_vjp_is_refused_while_a_learner_computes_it():
    from haaw.engine.guard import ShortcutRefused, refusing
    from haaw.engine.ops import defvjp
    from haaw.tools.flops import count_flops

    def same_(ctx, a):  # a view of its input, as reshape is; the trailing _ is dropped from the name
        return a[...]

    op = defvjp(same_, lambda ctx, g: 5 * g, flops=lambda inputs, out, needs: (7, 11), view=True)
    try:
        assert OPS["same"] is op and op.name == "same" and op.forward is same_ and op.vjp_all is None
        x = Tensor([1.0, 2.0], requires_grad=True)
        with count_flops() as counter:
            y = apply("same", x)
            y.sum().backward()
        np.testing.assert_array_equal(x.grad, [5.0, 5.0])  # the vjp given, not another
        assert (counter.forward["same"], counter.backward["same"]) == (7, 11)  # the cost given
        plain = Tensor([1.0, 2.0])
        seen = apply("same", plain)
        before = plain._version
        seen += 1.0  # a view (view=True): an in-place edit of the result is an edit of its input, as in PyTorch
        assert plain._version == before + 1
        np.testing.assert_array_equal(plain.data, [2.0, 3.0])
        with refusing(["ops.vjp"]):
            with pytest.raises(ShortcutRefused) as err:
                op.vjps[0](None, np.ones(2))
        assert str(err.value) == REFUSED_VJP
    finally:
        del OPS["same"]


def test_defvjp_with_one_vjp_for_every_input_refuses_it_too():
    from haaw.engine.guard import ShortcutRefused, refusing
    from haaw.engine.ops import defvjp

    def both(ctx, a, b):
        return a + b

    op = defvjp(both, vjp_all=lambda ctx, g: (2 * g, 3 * g))
    try:
        assert OPS["both"] is op and op.vjps == () and not op.view
        a, b = Tensor([1.0], requires_grad=True), Tensor([4.0], requires_grad=True)
        apply("both", a, b).sum().backward()
        assert (a.grad.tolist(), b.grad.tolist()) == ([2.0], [3.0])
        with refusing(["ops.vjp"]):
            with pytest.raises(ShortcutRefused) as err:
                op.vjp_all(None, np.ones(1))
        assert str(err.value) == REFUSED_VJP
    finally:
        del OPS["both"]


def test_a_fourth_power_and_its_slope_by_hand():
    x = Tensor([2.0, -1.5], requires_grad=True)
    y = x**4
    np.testing.assert_array_equal(y.data, [16.0, 5.0625])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [32.0, -13.5])  # 4x³


@pytest.mark.parametrize("bounds, x, slope", [
    ({"min": -1.0, "max": 1.0}, [-2.0, -1.0, 0.0, 1.0, 2.0], [0.0, 1.0, 1.0, 1.0, 0.0]),  # a bound itself: slope 1
    ({"max": 1.0}, [-5.0, 1.0, 2.0], [1.0, 1.0, 0.0]),  # no lower bound: nothing below is moved
    ({"min": -1.0}, [-2.0, -1.0, 3.0], [0.0, 1.0, 1.0]),
])
def test_clamp_s_slope_is_one_inside_and_on_the_bounds_and_zero_where_an_entry_was_moved(bounds, x, slope):
    """PyTorch's choice at the kinks (torch.clamp gives 1 on a bound); written out by hand, and against torch."""
    t = Tensor(x, requires_grad=True)
    t.clamp(**bounds).sum().backward()
    np.testing.assert_array_equal(t.grad, slope)
    torch = pytest.importorskip("torch")
    theirs = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    theirs.clamp(**bounds).sum().backward()
    np.testing.assert_array_equal(t.grad, theirs.grad.numpy())


def test_a_mean_over_an_empty_axis_is_nan_and_its_backward_warns_of_nothing():
    """A mean of no entries is nan (as in PyTorch); its gradient has no entries to divide among, and dividing the
    upstream gradient by the count 0 raises no NumPy warning, forward or backward (PyTorch's raises none)."""
    import warnings

    x = Tensor(np.zeros((0, 3)), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = x.mean(dim=0)
        assert np.isnan(m.data).all() and m.shape == (3,)
        m.backward(np.ones(3))
    assert x.grad.shape == (0, 3)


E = np.exp(1.0)
SOFT = np.array([1.0, E, E * E]) / (1.0 + E + E * E)  # softmax of [a, a + 1, a + 2], for any a


@pytest.mark.parametrize("dim", [-1, 0])
def test_softmax_and_log_softmax_shift_each_row_by_its_own_largest_entry(dim):
    """Rows a thousand apart: shifted by the largest entry of the whole tensor, the lower row's exponentials would
    all underflow to 0 and its softmax be 0/0. Each row's answer is the same closed form."""
    rows = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    x = Tensor(rows if dim == -1 else rows.T)
    s, logs = x.softmax(dim=dim).data, x.log_softmax(dim=dim).data
    expected = np.stack([SOFT, SOFT]) if dim == -1 else np.stack([SOFT, SOFT]).T
    np.testing.assert_allclose(s, expected, rtol=1e-12)
    np.testing.assert_allclose(logs, np.log(expected), rtol=1e-12)


def test_cross_entropy_rows_shift_each_row_by_its_own_largest_logit():
    logits = Tensor([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]], requires_grad=True)
    losses = apply("cross_entropy_rows", logits, targets=np.array([0, 2]))
    np.testing.assert_allclose(losses.data, [-np.log(SOFT[0]), -np.log(SOFT[2])], rtol=1e-12)
    losses.sum().backward()
    np.testing.assert_allclose(logits.grad, [SOFT - [1, 0, 0], SOFT - [0, 0, 1]], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shape, dim", [((2, 0), -1), ((0, 3), -1), ((0, 3), 0)])
def test_softmax_and_log_softmax_of_no_entries_keep_the_format(shape, dim):
    """torch.softmax and torch.log_softmax of an empty float32 tensor are empty float32 tensors, and they warn of
    nothing (an empty axis has a sum of 0, whose log no entry is left to hold)."""
    import warnings

    x = Tensor(np.zeros(shape, dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for y in (x.softmax(dim=dim), x.log_softmax(dim=dim)):
            assert y.shape == shape and y.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.bool_])
def test_integer_and_boolean_sums_along_an_axis_count_in_int64_as_pytorch_s(dtype):
    """PyTorch sums every integer format and bool into int64 (a uint8 or int8 total would overflow); along one
    axis, with or without keepdim. Hand values: the columns of [[100, 1], [100, 0]] (bool: of its nonzeros)."""
    x = Tensor(np.array([[100, 1], [100, 0]]).astype(dtype))
    col = [2, 1] if dtype is np.bool_ else [200, 1]
    for total, shape in ((x.sum(dim=0), (2,)), (x.sum(dim=0, keepdim=True), (1, 2))):
        assert total.dtype == np.int64 and total.shape == shape and total.data.ravel().tolist() == col
    assert x.sum().dtype == np.int64 and x.sum().item() == sum(col)


def test_a_16_bit_integer_matrix_product_is_exact_then_wrapped_round_as_pytorch_s():
    """4097² + 1 = 16,785,410 is past 2^24, where float32 holds only even integers (it would give ...408); the
    exact total, wrapped round to int16 as PyTorch's integer arithmetic does, is 8194."""
    a = Tensor(np.array([[4097, 1]], dtype=np.int16))
    b = Tensor(np.array([[4097], [1]], dtype=np.int16))
    exact = 4097 * 4097 + 1
    wrapped = (exact + 2**15) % 2**16 - 2**15
    product = a @ b
    assert product.dtype == np.int16 and product.item() == wrapped == 8194


def test_a_float16_mean_of_more_entries_than_float16_can_count_has_the_gradient_one_over_n():
    """70,000 is past float16's largest number (65,504): the count is divided in float32, and each entry's
    gradient 1/70,000 rounded once to float16 (a subnormal, 1.4305e-05), as torch.ones(70000, dtype=float16)
    .mean().backward() gives."""
    n = 70_000
    x = Tensor(np.ones(n, dtype=np.float16), requires_grad=True)
    m = x.mean()
    assert m.dtype == np.float16 and m.item() == 1.0
    m.backward()
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad, np.full(n, np.float16(1 / n)))
    assert float(np.float16(1 / n)) == pytest.approx(1.4305e-05, rel=1e-4)


def test_an_entry_picked_several_times_in_float16_gathers_its_gradient_in_float16_as_pytorch_s():
    """x[[0, 0, 0]] with upstream [2048, 1, 1]: PyTorch's index backward adds in float16, where 2048 + 1 rounds back
    to 2048 (float16's spacing there is 2): 2048, not the exact 2050. By hand, the same sums in float16."""
    x = Tensor(np.zeros(1, dtype=np.float16), requires_grad=True)
    x[np.array([0, 0, 0])].backward(np.array([2048.0, 1.0, 1.0], dtype=np.float16))
    by_hand = np.float16(np.float16(np.float16(0) + np.float16(2048)) + np.float16(1)) + np.float16(1)
    assert x.grad.dtype == np.float16 and x.grad.tolist() == [float(by_hand)] == [2048.0]
    torch = pytest.importorskip("torch")
    t = torch.zeros(1, dtype=torch.float16, requires_grad=True)
    t[torch.tensor([0, 0, 0])].backward(torch.tensor([2048.0, 1.0, 1.0], dtype=torch.float16))
    assert t.grad.tolist() == x.grad.tolist()
