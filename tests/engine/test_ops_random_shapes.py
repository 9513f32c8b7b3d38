"""Every operation of the table in haaw/engine/ops.py, on random shapes drawn by hypothesis, including
broadcasting: its gradient against finite differences and, where torch is installed, its output and
gradient against PyTorch's. (Its forward against a closed form, and the special cases: test_ops.py.)"""
import numpy as np
import pytest

pytest.importorskip("hypothesis")  # before its import: without it the file is skipped, not an error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haaw.engine.ops import OPS
from haaw.engine.tensor import Tensor, apply, cat
from haaw.tools import gradcheck

dims = st.integers(1, 4)
shapes = st.lists(dims, min_size=1, max_size=3).map(tuple)


def is_torch(x):
    return type(x).__module__.startswith("torch")


def values(data, shape, low=-2.0, high=2.0, seed_name="x"):
    seed = data.draw(st.integers(0, 2**32 - 1), label=f"seed of {seed_name}")
    return np.random.default_rng(seed).uniform(low, high, shape)


def away_from_zero(data, shape, name):
    """Values with |x| in [0.5, 2]: no division by ~0, no ReLU kink inside the finite difference."""
    x = values(data, shape, 0.5, 2.0, name)
    return x * np.where(values(data, shape, -1, 1, name + " sign") < 0, -1, 1)


def distinct(data, shape, name):
    """Values with no ties, so max has a single winner and its derivative exists."""
    n = int(np.prod(shape))
    order = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label=name)).permutation(n)
    return (order.reshape(shape) - n / 2) * 0.37


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: some dimensions dropped or set to 1 on one side."""
    shape = draw(shapes)
    other = list(shape[draw(st.integers(0, len(shape) - 1)):])
    for i in range(len(other)):
        if draw(st.booleans()):
            other[i] = 1
    return (shape, tuple(other)) if draw(st.booleans()) else (tuple(other), shape)


def dim_args(data, ndim):
    dim = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                              st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)),
                    label="dim")
    return dim, data.draw(st.booleans(), label="keepdim")


def binary(op):
    def spec(data):
        a_shape, b_shape = data.draw(broadcast_pair(), label="shapes")
        return op, [values(data, a_shape, seed_name="a"), away_from_zero(data, b_shape, "b")]
    return spec


def unary(fn, make=values):
    def spec(data):
        shape = data.draw(shapes, label="shape")
        return fn, [make(data, shape, "x") if make is not values else values(data, shape)]
    return spec


def matmul_spec(data):
    m, k, n = data.draw(dims), data.draw(dims), data.draw(dims)
    batch = data.draw(st.sampled_from([(), (2,), (3, 1)]), label="batch")
    b_batch = batch[-1:] if data.draw(st.booleans(), label="b batched") else ()
    return (lambda a, b: a @ b), [values(data, batch + (m, k), seed_name="a"),
                                  values(data, b_batch + (k, n), seed_name="b")]


def linear_spec(data):
    m, k, n = data.draw(dims), data.draw(dims), data.draw(dims)
    batch = data.draw(st.sampled_from([(), (2,)]), label="batch")

    def fn(x, w, b):
        if is_torch(x):
            return __import__("torch").nn.functional.linear(x, w.T, b)  # torch keeps W as (out, in)
        return apply("linear", x, w, b)
    return fn, [values(data, batch + (m, k), seed_name="x"), values(data, (k, n), seed_name="w"),
                values(data, (n,), seed_name="b")]


def reduction(name):
    def spec(data):
        shape = data.draw(shapes, label="shape")
        dim, keepdim = dim_args(data, len(shape))

        def fn(a):
            if name in ("max", "min"):  # amax, amin: values only, over one axis or several, as the table's max
                return getattr(a, "a" + name)(dim=() if dim is None else dim, keepdim=keepdim)
            return getattr(a, name)(dim=dim, keepdim=keepdim)
        return fn, [distinct(data, shape, "x") if name in ("max", "min") else values(data, shape)]
    return spec


def reshape_spec(data):
    shape = data.draw(shapes, label="shape")
    target = (-1,) + ((shape[-1],) if data.draw(st.booleans(), label="keep last") else ())
    return (lambda a: a.reshape(target)), [values(data, shape)]


def permute_spec(data):
    shape = data.draw(shapes, label="shape")
    perm = tuple(data.draw(st.permutations(range(len(shape))), label="dims"))
    perm = tuple(d - len(shape) if data.draw(st.booleans(), label="negative") else d for d in perm)
    return (lambda a: a.permute(*perm)), [values(data, shape)]


def getitem_spec(data):
    shape = data.draw(st.lists(dims, min_size=2, max_size=3).map(tuple), label="shape")
    fancy = np.array(data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=5), label="rows"))
    index = data.draw(st.sampled_from([
        (slice(None), 0), (slice(1, None),), (Ellipsis, slice(None, None, 2)), (fancy,), (fancy, 0)]),
        label="index")
    return (lambda a: a[tuple(__import__("torch").as_tensor(i) if isinstance(i, np.ndarray) else i
                              for i in index)] if is_torch(a) else a[index]), [values(data, shape)]


def cat_spec(data):
    shape = list(data.draw(shapes, label="shape"))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    other = list(shape)
    other[dim] = data.draw(dims, label="other size")
    return (lambda a, b: __import__("torch").cat([a, b], dim) if is_torch(a) else cat([a, b], dim)), \
        [values(data, tuple(shape), seed_name="a"), values(data, tuple(other), seed_name="b")]


def softmax_spec(name):
    def spec(data):
        shape = data.draw(shapes, label="shape")
        dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
        return (lambda a: getattr(a, name)(dim)), [values(data, shape, -4, 4)]
    return spec


def masked_softmax_spec(data):
    shape = data.draw(st.lists(dims, min_size=2, max_size=3).map(tuple), label="shape")
    mask = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="mask")).random(shape) < 0.7
    mask[..., 0, :] = False  # one row fully masked: output 0, gradient 0, never NaN

    def fn(a):
        if is_torch(a):
            import torch
            m = torch.as_tensor(mask)
            w = torch.softmax(a.masked_fill(~m, -torch.inf), -1)
            return torch.nan_to_num(w, nan=0.0)  # torch's plain softmax gives NaN on the masked row
        return apply("masked_softmax", a, mask=mask, dim=-1)
    return fn, [values(data, shape, -4, 4)]


def cross_entropy_rows_spec(data):
    """Logits (N, C) and one class id per row. (F.cross_entropy around it, with PyTorch's shapes, ignore_index,
    class weights and haaw's padding mask: tests/nn/test_functional_random_shapes.py.)"""
    n, classes = data.draw(dims, label="N"), data.draw(st.integers(2, 5), label="classes")
    targets = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="targets")).integers(0, classes, n)

    def fn(logits):
        if is_torch(logits):
            import torch
            return torch.nn.functional.cross_entropy(logits, torch.as_tensor(targets), reduction="none")
        return apply("cross_entropy_rows", logits, targets=targets)
    return fn, [values(data, (n, classes), -3, 3)]


def _alternate(a):
    """True, False, True, ... over the entries of ``a``, in its shape: a condition that does not move under the
    small steps of finite differences."""
    return np.arange(int(np.prod(tuple(a.shape)))).reshape(tuple(a.shape)) % 2 == 0


def _where(a, b):
    if is_torch(a):
        import torch
        return torch.where(torch.as_tensor(_alternate(a)), a, b)
    return apply("where", a, b, condition=_alternate(a))


SPECS = {
    "add": binary(lambda a, b: a + b),
    "sub": binary(lambda a, b: a - b),
    "mul": binary(lambda a, b: a * b),
    "div": binary(lambda a, b: a / b),
    "pow": unary(lambda a: a**3 + (a * a + 1) ** 0.5),
    "neg": unary(lambda a: -a),
    "matmul": matmul_spec,
    "linear": linear_spec,
    "exp": unary(lambda a: a.exp()),
    "log": unary(lambda a: (a * a + 0.1).log()),
    "tanh": unary(lambda a: a.tanh()),
    "relu": unary(lambda a: a.relu(), away_from_zero),
    "sigmoid": unary(lambda a: a.sigmoid()),
    "sum": reduction("sum"),
    "mean": reduction("mean"),
    "max": reduction("max"),
    "min": reduction("min"),
    "reshape": reshape_spec,
    "permute": permute_spec,
    "getitem": getitem_spec,
    "cast": lambda data: ((lambda a: a.to(__import__("torch").float32).to(__import__("torch").float64) if is_torch(a)
                           else a.to(np.float32).to(np.float64)), [values(data, data.draw(shapes, label="shape"))]),
    "cat": cat_spec,
    "clamp": unary(lambda a: a.clamp(-1.0, 1.0), away_from_zero),  # |x| in [0.5, 2]: inside and outside
    "where": binary(_where),
    "softmax": softmax_spec("softmax"),
    "log_softmax": softmax_spec("log_softmax"),
    "masked_softmax": masked_softmax_spec,
    "cross_entropy_rows": cross_entropy_rows_spec,
}
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_operation_in_the_table_is_tested():
    assert set(SPECS) == set(OPS)


@pytest.mark.parametrize("name", sorted(OPS))
@FAST
@given(data=st.data())
def test_gradient_matches_finite_differences(name, data):
    if name == "cast":  # a cast rounds: finite differences see its tiny steps (its own test is below)
        return
    fn, arrays = SPECS[name](data)
    report = gradcheck(fn, *arrays)
    assert report.ok, str(report)


@pytest.mark.parametrize("name", sorted(OPS))
@FAST
@given(data=st.data())
def test_output_and_gradient_match_torch(name, data):
    torch = pytest.importorskip("torch")
    fn, arrays = SPECS[name](data)
    ours = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = fn(*ours), fn(*theirs)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    upstream = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(upstream)
    ref.backward(torch.tensor(upstream))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-10, atol=1e-12)
