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
    "max": (lambda a: a.max(dim=-1), lambda a: np.where(a[:, 0] > a[:, 1], a[:, 0], a[:, 1]),
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


def test_max_shares_the_gradient_equally_between_ties():
    x = Tensor(np.array([[3.0, 1.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
    x.max(dim=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    y = Tensor(np.array([1.0, 4.0, 4.0]), requires_grad=True)
    y.max().backward()
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
