"""Differential tests against PyTorch: random programs run in haaw and in torch (float64), compared.

Each property draws a small program (a few operations over a few tensors), runs it once with haaw and
once with torch, and compares what comes out: the forward values, the gradient of every leaf, and
errors (where haaw refuses on purpose, docs/pytorch.md says so and the property accepts the refusal, never
a different number). The examples are drawn from a fixed seed and kept few, so the suite's time barely
moves; each property names the bugs it was written to find.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("hypothesis")  # before its import: without it the file is skipped, not an error
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import haaw
import haaw.nn.functional as F
from haaw import Tensor
from haaw.amp import DynamicLossScaler, MasterWeights
from haaw.engine.tensor import apply
from haaw.optim import SGD, Adam

torch = pytest.importorskip("torch")

FEW = settings(max_examples=40, derandomize=True, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHAPES = [(), (3,), (2, 3), (0, 3), (2, 1, 3)]

# --- a tiny interpreter: the same program for both libraries ----------------------------------------------
UNARY = {
    "exp": lambda x: x.exp(), "tanh": lambda x: x.tanh(), "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(), "square": lambda x: x * x, "neg": lambda x: -x, "two_to": lambda x: 2 ** x,
    "sum_all": lambda x: x.sum(), "sum_last": lambda x: x.sum(dim=-1) if x.ndim else x,
    "sum_keep": lambda x: x.sum(dim=0, keepdim=True) if x.ndim else x,
    "mean_last": lambda x: x.mean(dim=-1) if x.ndim and x.shape[-1] else x,
    "softmax": lambda x: x.softmax(dim=-1) if x.ndim else x,
    "flip": lambda x: x.transpose(0, -1) if x.ndim >= 2 else x,
    "pick": lambda x: x[np.array([0, 0, -1])] if x.ndim and x.shape[0] else x,
    "scale": lambda x: x * 0.5 + 1.0,
}
BINARY = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y * y + 1.0),
}


def fits(a, b) -> bool:
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
        return True
    except ValueError:
        return False


def run(program, leaves):
    """Apply the program to a pool that starts with the leaves; each step adds one tensor to the pool."""
    pool = list(leaves)
    for op, i, j in program:
        x = pool[i % len(pool)]
        if op in UNARY:
            pool.append(UNARY[op](x))
        else:
            y = pool[j % len(pool)]
            pool.append(BINARY[op](x, y) if fits(x, y) else x)
    return pool


def loss_of(pool, weights):
    """Σ over every tensor made of Σ (tensor · fixed random weights): each one's gradient is checked."""
    total = None
    for t, w in zip(pool, weights):
        term = (t * w).sum()
        total = term if total is None else total + term
    return total


def as_torch(x):
    return torch.tensor(x, dtype=torch.float64, requires_grad=True)


def compare(ours, theirs, what):
    a = np.asarray(ours.data if isinstance(ours, Tensor) else ours, dtype=np.float64)
    b = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs, dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} against torch's {b.shape}"
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=what)


programs = st.lists(st.tuples(st.sampled_from(sorted(UNARY) + sorted(BINARY)), st.integers(0, 20),
                              st.integers(0, 20)), min_size=1, max_size=6)


@settings(FEW, max_examples=150)
@given(program=programs, shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_random_programs_give_pytorch_s_values_and_gradients(program, shapes, seed):
    """The op table, broadcasting, reductions over dims, index arrays, 0-d and empty tensors."""
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(s) for s in shapes]
    ours = run(program, [Tensor(d.copy(), requires_grad=True) for d in data])
    theirs = run(program, [as_torch(d) for d in data])
    weights = [rng.standard_normal(tuple(t.shape)) for t in ours]
    for k, (a, b) in enumerate(zip(ours, theirs)):
        compare(a, b, f"tensor {k} of {program}")
    loss_of(ours, weights).backward()
    loss_of(theirs, [torch.tensor(w) for w in weights]).backward()
    for k in range(len(data)):
        compare(ours[k].grad, theirs[k].grad, f"gradient of leaf {k} after {program}")


@FEW
@given(inside=programs, outside=programs, seed=st.integers(0, 2**16), checkpoint_first=st.booleans())
def test_checkpoint_with_captured_intermediates_matches_pytorch(inside, outside, seed, checkpoint_first):
    """A checkpointed function that uses tensors of the enclosing graph: each path counted once."""
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    rng = np.random.default_rng(seed)
    x_data, z_data = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def build(lib_tensor, ckpt):
        x, z = lib_tensor(x_data), lib_tensor(z_data)
        h = run(outside, [x])[-1]  # an intermediate of the enclosing graph
        h = h if tuple(h.shape) == (2, 3) else x * 2.0

        def fn(t):
            r = run(inside, [t, h])[-1]
            return ((r if tuple(r.shape) == (2, 3) else t) * h).sum(dim=-1)  # captures h

        c = ckpt(fn, z)
        outer = (h * h).sum()
        loss = c.sum() + outer if checkpoint_first else outer + c.sum()
        return loss, x, z

    loss, x, z = build(lambda d: Tensor(d.copy(), requires_grad=True), haaw.checkpoint)
    tloss, tx, tz = build(as_torch, lambda f, t: torch_checkpoint(f, t, use_reentrant=False))
    compare(loss, tloss, "loss")
    loss.backward()
    tloss.backward()
    compare(x.grad, tx.grad, f"dL/dx, inside {inside}, outside {outside}")
    compare(z.grad, tz.grad, f"dL/dz, inside {inside}, outside {outside}")


@pytest.mark.parametrize("kind", ["int8", "int16", "int64", "bool"])
@pytest.mark.parametrize("op", ["sum", "sigmoid", "exp", "mean", "plus_one", "tanh"])
@settings(FEW, max_examples=8)
@given(values=st.lists(st.integers(-100, 100), min_size=1, max_size=5))
def test_integer_and_bool_tensors_give_pytorch_s_results_or_its_refusal(values, kind, op):
    data = np.array(values).astype(kind)
    do = {"sum": lambda t: t.sum(), "sigmoid": lambda t: t.sigmoid(), "exp": lambda t: (t * 0).exp(),
          "mean": lambda t: t.mean(), "plus_one": lambda t: t + 1, "tanh": lambda t: t.tanh()}[op]
    try:
        theirs = do(torch.tensor(data))
    except RuntimeError:  # torch refuses (mean of integers): haaw must refuse too, not answer
        with pytest.raises(TypeError):
            do(Tensor(data))
        return
    ours = do(Tensor(data))
    # PyTorch computes in float32, haaw in float64 (docs/pytorch.md): float32's precision
    np.testing.assert_allclose(ours.data.astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-6, atol=1e-7)
    assert ours.data.dtype.kind in ("f" if theirs.dtype.is_floating_point else "iub")


@FEW
@given(pattern=st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=6),
       which=st.sampled_from(["adam", "sgd"]), seed=st.integers(0, 2**16))
def test_optimizers_keep_per_parameter_state_as_pytorch(pattern, which, seed):
    """Parameters that get a gradient at some steps only: each counts its own steps and momentum."""
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal(2) for _ in range(3)]
    ours = [Tensor(s.copy(), requires_grad=True) for s in starts]
    theirs = [as_torch(s) for s in starts]
    opt = Adam(ours, lr=0.05) if which == "adam" else SGD(ours, lr=0.05, momentum=0.9)
    topt = torch.optim.Adam(theirs, lr=0.05) if which == "adam" else torch.optim.SGD(theirs, lr=0.05, momentum=0.9)
    for gets in pattern:
        for o, t, g in zip(ours, theirs, gets):
            grad = rng.standard_normal(2)
            o.grad = grad.copy() if g else None
            t.grad = torch.tensor(grad) if g else None
        opt.step()
        topt.step()
    for k, (o, t) in enumerate(zip(ours, theirs)):
        compare(o, t, f"parameter {k} after {pattern}")


@FEW
@given(frozen=st.lists(st.booleans(), min_size=2, max_size=3), overflow_at=st.sets(st.integers(0, 7), max_size=2),
       seed=st.integers(0, 2**16))
def test_the_scaler_with_frozen_parameters_steps_and_scales_as_pytorch(frozen, overflow_at, seed):
    """Master weights and a dynamic scaler, some parameters without gradients, some steps overflowing."""
    assume(not all(frozen))  # PyTorch's scaler refuses a step with no gradient at all
    rng = np.random.default_rng(seed)
    starts = [rng.standard_normal(2).astype(np.float16) for _ in frozen]
    ours = [Tensor(s.copy(), requires_grad=not f) for s, f in zip(starts, frozen)]
    master, scaler = MasterWeights(ours, "float16"), DynamicLossScaler(2.0**8, growth_interval=3)
    theirs = [torch.tensor(s.astype(np.float32), requires_grad=not f) for s, f in zip(starts, frozen)]
    tscaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=3)
    topt = torch.optim.SGD(theirs, lr=0.1)
    tscaler.scale(torch.zeros(()))  # the scaler starts its scale on its first use
    for step in range(8):
        for o, t, f in zip(ours, theirs, frozen):
            grad = rng.standard_normal(2) * (np.inf if step in overflow_at else 1.0)
            o.grad = None if f else (grad * scaler.scale).astype(np.float16)
            t.grad = None if f else torch.tensor(grad * tscaler.get_scale(), dtype=torch.float32)
        master.step(scaler, lr=0.1)
        tscaler.step(topt)
        tscaler.update()
        assert scaler.scale == tscaler.get_scale(), f"step {step}"
    for k, (m, t) in enumerate(zip(master.master, theirs)):
        np.testing.assert_allclose(m, t.detach().numpy(), rtol=1e-3, atol=1e-3, err_msg=f"parameter {k}")


@FEW
@given(write=st.sampled_from(["setitem", "iadd"]), seed=st.integers(0, 2**16))
def test_a_write_of_a_tensor_that_requires_grad_gives_pytorch_s_gradient_or_is_refused(write, seed):
    """haaw does not record in-place writes (docs/pytorch.md): it must refuse them, never lose the gradient."""
    rng = np.random.default_rng(seed)
    w_data = rng.standard_normal(2)

    def program(lib_tensor, zeros):
        w = lib_tensor(w_data)
        buf = zeros()
        if write == "setitem":
            buf[0:2] = w * 2.0
        else:
            buf += w * 2.0
        (buf * buf).sum().backward()
        return w.grad

    tgrad = program(as_torch, lambda: torch.zeros(2, dtype=torch.float64))
    try:
        ours = program(lambda d: Tensor(d.copy(), requires_grad=True), lambda: Tensor(np.zeros(2)))
    except RuntimeError as refused:
        assert "would be lost" in str(refused)
        return
    compare(ours, tgrad, "the written tensor's gradient")


@FEW
@given(picks=st.lists(st.integers(0, 3), min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_index_arrays_and_targets_changed_after_the_forward_pass_change_nothing(picks, seed):
    """The learner reuses an index array (or the targets) after the forward pass, before backward."""
    rng = np.random.default_rng(seed)
    x_data, logits_data = rng.standard_normal(4), rng.standard_normal((len(picks), 4))
    idx, targets = np.array(picks), np.array(picks)
    x, logits = Tensor(x_data.copy(), requires_grad=True), Tensor(logits_data.copy(), requires_grad=True)
    tx, tlogits = as_torch(x_data), as_torch(logits_data)
    loss = (x[idx] * x[idx]).sum() + F.cross_entropy(logits, targets)
    tloss = (tx[torch.tensor(idx)] ** 2).sum() + torch.nn.functional.cross_entropy(tlogits, torch.tensor(targets))
    idx[:] = (idx + 1) % 4  # reused for something else
    targets[:] = (targets + 2) % 4
    loss.backward()
    tloss.backward()
    compare(x.grad, tx.grad, "dL/dx")
    compare(logits.grad, tlogits.grad, "dL/dlogits")


# --- Python numbers with 16-bit tensors -----------------------------------------------------------------------
NUMBER_OPS = {
    "mul": lambda x, n: x * n, "rmul": lambda x, n: n * x, "add": lambda x, n: x + n, "radd": lambda x, n: n + x,
    "sub": lambda x, n: x - n, "rsub": lambda x, n: n - x, "div": lambda x, n: x / n, "rdiv": lambda x, n: n / x,
    "rpow": lambda x, n: abs(n) ** x, "iadd": None, "imul": None, "idiv": None,
}
NUMBERS = [1e5, 1e-5, 2**16, 0.25, 3, -7.3, 70000.0, np.float64(1e5), np.float32(3.1e-6), np.int64(-300), 10]


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(NUMBER_OPS))
@settings(FEW, max_examples=8)
@given(number=st.sampled_from(NUMBERS), exponents=st.lists(st.integers(-12, 10), min_size=1, max_size=4),
       seed=st.integers(0, 2**16))
def test_python_numbers_with_16_bit_tensors_compute_in_float32_and_round_once(number, exponents, fmt, op, seed):
    """A number rounded to float16 before it met the tensor: x16 * 1e5 was inf (torch: 100.06), x16 / 1e5 and its
    gradient 0; bf16 2 ** 10 was 1000. Every value is the exact result rounded once to the tensor's format, and so
    is every gradient, within two units in the last place of torch's."""
    rng = np.random.default_rng(seed)
    data = (rng.uniform(1, 2, len(exponents)) * rng.choice([-1, 1], len(exponents)) * 2.0 ** np.array(exponents))
    dtype = haaw.engine.dtypes.as_dtype(fmt)
    low = data.astype(dtype)
    if op == "rpow":
        low = np.clip(low.astype(np.float64), -12, 12).astype(dtype)  # a power that stays in float32's range
    tdtype = getattr(torch, fmt)
    ulp = 2.0 ** (-10 if fmt == "float16" else -7)
    if op.startswith("i"):
        change = {"iadd": lambda t: t.__iadd__(number), "imul": lambda t: t.__imul__(number),
                  "idiv": lambda t: t.__itruediv__(number)}[op]
        ours, theirs = Tensor(low.copy()), torch.tensor(low.astype(np.float32)).to(tdtype)
        with np.errstate(over="ignore"):  # inf where the format ends, as torch: NumPy also warns
            change(ours)
        change(theirs)
        with np.errstate(over="ignore"):
            exact = {"iadd": np.add, "imul": np.multiply, "idiv": np.divide}[op](
                low.astype(np.float64), float(number)).astype(np.float32).astype(dtype)
        np.testing.assert_array_equal(ours.data, exact, err_msg=f"{op} {number}: not rounded once")
        if op != "iadd":  # torch's CPU kernel rounds the number to the format first in x += n
            np.testing.assert_array_equal(ours.data.astype(np.float32), theirs.float().numpy(), err_msg=f"{op} {number}")
        return
    x = Tensor(low.copy(), requires_grad=True)
    tx = torch.tensor(low.astype(np.float32)).to(tdtype).requires_grad_()
    with np.errstate(over="ignore"):
        out, tout = NUMBER_OPS[op](x, number), NUMBER_OPS[op](tx, number)
    assert out.dtype == dtype, f"{op} {number}: {out.dtype}"
    with np.errstate(over="ignore", divide="ignore"):
        exact = NUMBER_OPS[op](low.astype(np.float64), float(number)).astype(np.float32).astype(dtype)
    np.testing.assert_array_equal(out.data, exact, err_msg=f"{op} with {number!r}: not rounded once")
    # torch's CPU kernels round twice in x ± n and n ** x (n to the format first: x16 + 70000 is inf, and so is
    # 1e5 ** x16) and in n / x (1 / x first); where n is beyond the format, haaw's answer is the exact one, not torch's
    twice = op in ("add", "radd", "sub", "rsub", "rdiv", "rpow")
    with np.errstate(over="ignore"):
        if op != "rdiv" and twice and not np.isfinite(np.float32(number).astype(dtype)):
            return
    close_to_torch(out.data, tout, ulp, twice, f"{op} with {number!r}")
    g = rng.standard_normal(len(exponents)).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        out.backward(g)
    tout.backward(torch.tensor(g.astype(np.float32)).to(tdtype))
    assert x.grad.dtype == dtype
    if op == "rdiv":  # torch rounds -g · n / x² three times, with subnormal steps: the exact gradient is the oracle
        x64 = low.astype(np.float64)
        exact_grad = (-g.astype(np.float64) * float(number) / (x64 * x64)).astype(np.float32)
        with np.errstate(over="ignore"):
            np.testing.assert_allclose(x.grad.astype(np.float32), exact_grad.astype(dtype).astype(np.float32),
                                       rtol=ulp, atol=2.0 ** -23, err_msg=f"gradient of rdiv with {number!r}")
        return
    close_to_torch(x.grad, tx.grad, ulp, twice, f"gradient of {op} with {number!r}")


def close_to_torch(ours, theirs, ulp, rounded_twice, what):
    """Within two units in the last place (and two of the smallest subnormals) of torch's; where torch rounded
    twice, four, and only where its result is finite."""
    ours, theirs = ours.astype(np.float32), theirs.detach().float().numpy()
    keep = np.isfinite(theirs) | (not rounded_twice)
    np.testing.assert_allclose(ours[keep], theirs[keep], rtol=(4 if rounded_twice else 2) * ulp, atol=2.0 ** (-23 if ulp < 2**-8 else -132),
                               err_msg=what)


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_a_16_bit_softmax_over_a_row_past_65504_entries_is_not_all_zeros(fmt):
    """The float32 total was rounded to float16 first: inf, and every weight 0."""
    dtype = haaw.engine.dtypes.as_dtype(fmt)
    data = np.random.default_rng(0).standard_normal((2, 70_000)).astype(dtype)
    ours = Tensor(data).softmax(dim=-1)
    theirs = torch.tensor(data.astype(np.float32)).to(getattr(torch, fmt)).softmax(dim=-1)
    assert ours.dtype == dtype
    np.testing.assert_allclose(ours.data.astype(np.float32), theirs.float().numpy(), rtol=2 ** -7, atol=0)
    mask = np.ones((2, 70_000), dtype=bool)
    masked = apply("masked_softmax", Tensor(data), mask=mask)
    np.testing.assert_allclose(masked.data.astype(np.float32), ours.data.astype(np.float32), rtol=2 ** -6, atol=2**-23)


# --- integer and bool tensors: every operator, in place too -------------------------------------------------------
def _in_place(op, n):
    def change(t):
        getattr(t, op)(n)
        return t
    return change


INTEGER_OPS = {
    "mul_1000": lambda t: t * 1000, "add_300": lambda t: 300 + t, "sub_7": lambda t: t - 7, "half": lambda t: t * 0.5,
    "two_to": lambda t: 2 ** t, "matmul": lambda t: t.reshape(1, -1) @ t.reshape(-1, 1),
    "iadd_half": _in_place("__iadd__", 0.5), "imul_half": _in_place("__imul__", 0.5),
    "isub_half": _in_place("__isub__", 0.5), "idiv_2": _in_place("__itruediv__", 2),
    "iadd_1": _in_place("__iadd__", 1), "imul_3": _in_place("__imul__", 3),
}


@pytest.mark.parametrize("kind", ["int8", "int16", "uint8", "int32", "int64", "bool"])
@pytest.mark.parametrize("op", sorted(INTEGER_OPS))
@settings(FEW, max_examples=6)
@given(values=st.lists(st.integers(-4000, 4000), min_size=1, max_size=8))
def test_integer_tensors_give_pytorch_s_numbers_or_its_refusal(values, kind, op):
    """int_t += 0.5 truncated silently, int16 @ int16 went through float32 (off by one past 2^24), 2 ** [-1, 2] and
    int8 * 1000 raised NumPy's errors: each must be torch's answer, bit for bit, or a RuntimeError where torch
    raises one."""
    data = np.array(values)
    if op == "two_to":
        data = data % 9 - 2  # powers of two from 2^-2 to 2^6
    data = data.astype(np.int64).astype(kind)  # wrapped round, as torch.tensor(...).to(int8) does
    do = INTEGER_OPS[op]
    try:
        theirs = do(torch.tensor(data))
    except RuntimeError as refusal:
        if "not implemented" in str(refusal):  # torch has no kernel for it (bool matmul): nothing to compare
            return
        with pytest.raises(RuntimeError):
            do(Tensor(data))
        return
    ours = do(Tensor(data))
    if theirs.dtype.is_floating_point:  # haaw's floats are float64 where torch's are float32 (docs/pytorch.md)
        assert ours.data.dtype.kind == "f", f"{op}: {ours.dtype} against torch's {theirs.dtype}"
    else:
        assert str(ours.dtype) == str(theirs.dtype)[6:], f"{op}: {ours.dtype} against torch's {theirs.dtype}"
    np.testing.assert_allclose(ours.data.astype(np.float64), theirs.numpy().astype(np.float64), rtol=1e-7, atol=0,
                               err_msg=op)


def test_a_cast_to_integers_of_a_tensor_that_requires_grad_is_outside_the_graph():
    """x.to(np.int64) recorded the cast, and backward sent a straight-through gradient; torch: no gradient."""
    x, tx = Tensor([1.5, -2.5], requires_grad=True), torch.tensor([1.5, -2.5], requires_grad=True)
    for dtype, tdtype in ((np.int64, torch.int64), (np.int8, torch.int8), (np.bool_, torch.bool)):
        ours, theirs = x.to(dtype), tx.to(tdtype)
        assert ours.requires_grad is theirs.requires_grad is False
        np.testing.assert_array_equal(ours.data, theirs.numpy())
    with pytest.raises(RuntimeError):
        (x.to(np.int64) * 2).sum().backward()


# --- aliasing: index tensors, Functions and checkpoints ---------------------------------------------------------
@FEW
@given(picks=st.lists(st.integers(0, 3), min_size=1, max_size=5), column=st.integers(0, 2),
       in_tuple=st.booleans(), seed=st.integers(0, 2**16))
def test_an_index_tensor_edited_after_the_forward_pass_changes_no_gradient(picks, column, in_tuple, seed):
    """x[idx, 0] with idx a Tensor kept idx itself: edited before backward, the gradient went to other rows."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((4, 3))
    x, tx = Tensor(data.copy(), requires_grad=True), as_torch(data)
    idx, tidx = Tensor(np.array(picks)), torch.tensor(picks)
    out = x[idx, column] if in_tuple else x[idx]
    tout = tx[tidx, column] if in_tuple else tx[tidx]
    with haaw.no_grad():
        idx += 1  # reused for something else; torch copies the index too
    weights = rng.standard_normal(tuple(out.shape))
    (out * weights).sum().backward()
    (tout * torch.tensor(weights)).sum().backward()
    compare(x.grad, tx.grad, f"dL/dx for picks {picks}")


@FEW
@given(how=st.sampled_from(["function_returns_input", "function_returns_view", "checkpoint_returns_input",
                            "checkpoint_returns_view"]), seed=st.integers(0, 2**16))
def test_an_operation_that_returns_its_input_shares_its_version_counter(how, seed):
    """Forward returned its input (or a view): the output shared the memory but not the version counter, so
    editing the output changed the input, and backward used the edited values. torch refuses; so must haaw."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((2, 3))

    class Same(haaw.Function):
        @staticmethod
        def forward(ctx, a):
            return a if how == "function_returns_input" else a[0]

        @staticmethod
        def backward(ctx, g):
            return g if how == "function_returns_input" else np.concatenate([g[None], np.zeros((1, 3))])

    class TSame(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a if how == "function_returns_input" else a[0]

        @staticmethod
        def backward(ctx, g):
            return g if how == "function_returns_input" else torch.cat([g[None], torch.zeros(1, 3, dtype=g.dtype)])

    def build(lib_tensor, lib):
        x = lib_tensor(data)
        h = x * 2.0
        if how.startswith("function"):
            o = (Same if lib is haaw else TSame).apply(h)
        else:
            f = (lambda t: t) if how.endswith("input") else (lambda t: t[0])
            o = haaw.checkpoint(f, h) if lib is haaw else \
                torch.utils.checkpoint.checkpoint(f, h, use_reentrant=False)
        loss = (h * h).sum() + o.sum()
        with lib.no_grad():
            o += 1.0  # writes through to h: h * h's saved input is no longer what it was
        loss.backward()
        return x.grad

    try:
        program_torch = build(as_torch, torch)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            build(lambda d: Tensor(d.copy(), requires_grad=True), haaw)
        return
    compare(build(lambda d: Tensor(d.copy(), requires_grad=True), haaw), program_torch, how)


# --- Tensor.register_hook ----------------------------------------------------------------------------------------
HOOKS = {"double": lambda g: g * 2.0, "shift": lambda g: g + 1.0, "clip": lambda g: g.clip(-0.5, 0.5),
         "none": lambda g: None}


@FEW
@given(program=programs, shapes=st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
       hooks=st.lists(st.tuples(st.integers(0, 20), st.sampled_from(sorted(HOOKS)), st.booleans()), max_size=5),
       seed=st.integers(0, 2**16))
def test_gradient_hooks_see_and_replace_what_pytorch_s_do(program, shapes, hooks, seed):
    """Hooks on leaves and intermediates, several on one tensor, some removed after the first backward: each hook
    must see the gradient torch's sees (the whole of the pass, after the hooks registered before it), and what
    it returns must replace the gradient, as in torch. haaw had no register_hook."""
    rng = np.random.default_rng(seed)
    data = [rng.standard_normal(s) for s in shapes]
    pools = run(program, [Tensor(d.copy(), requires_grad=True) for d in data]), \
        run(program, [as_torch(d) for d in data])
    weights = [rng.standard_normal(tuple(t.shape)) for t in pools[0]]
    seen, handles = ({}, {}), ([], [])
    for side, pool in enumerate(pools):
        for k, (at, kind, removed) in enumerate(hooks):
            def hook(g, k=k, kind=kind, side=side):
                seen[side].setdefault(k, []).append(np.array(g.detach().numpy() if side else g, dtype=np.float64))
                return HOOKS[kind](g)
            handle = pool[at % len(pool)].register_hook(hook)
            if removed:
                handles[side].append(handle)
    for side, (pool, lib_weights) in enumerate(zip(pools, (weights, [torch.tensor(w) for w in weights]))):
        loss = loss_of(pool, lib_weights)
        loss.backward(retain_graph=True)
        for handle in handles[side]:
            handle.remove()
        loss.backward()
    for k in range(len(data)):
        compare(pools[0][k].grad, pools[1][k].grad, f"gradient of leaf {k} after {program} with hooks {hooks}")
    assert seen[0].keys() == seen[1].keys(), f"hooks called: {sorted(seen[0])} against torch's {sorted(seen[1])}"
    for k in seen[0]:
        assert len(seen[0][k]) == len(seen[1][k]), f"hook {k} ran {len(seen[0][k])} times, torch's {len(seen[1][k])}"
        for ours, theirs in zip(seen[0][k], seen[1][k]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12, err_msg=f"what hook {k} saw")


def test_a_hook_on_a_weight_a_checkpoint_captures_runs_once_on_the_whole_gradient():
    """A weight used inside a checkpoint and outside it: its hook sees the sum of both paths once, as torch's,
    not the recomputation's share first and then the sum again."""
    data = np.array([0.5, -1.5, 2.0])

    def build(lib):
        w = Tensor(data.copy(), requires_grad=True) if lib is haaw else as_torch(data)
        x = Tensor(data * 3, requires_grad=True) if lib is haaw else as_torch(data * 3)
        calls = []
        w.register_hook(lambda g: calls.append(np.array(g.detach().numpy() if lib is torch else g)) or g.clip(-1, 1))
        inner = haaw.checkpoint(lambda h: (h * w).tanh(), x) if lib is haaw else \
            torch.utils.checkpoint.checkpoint(lambda h: (h * w).tanh(), x, use_reentrant=False)
        (inner.sum() + (w * w).sum()).backward()
        return calls, np.array(w.grad.detach().numpy() if lib is torch else w.grad)

    (ours, our_grad), (theirs, their_grad) = build(haaw), build(torch)
    assert len(ours) == len(theirs) == 1, f"the hook ran {len(ours)} times, torch's {len(theirs)}"
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-9)
    np.testing.assert_allclose(our_grad, their_grad, rtol=1e-9)


# --- nn.Dropout and the modules' training mode -------------------------------------------------------------------
@FEW
@given(p=st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), shape=st.sampled_from([(3,), (4, 5), (2, 3, 4)]),
       calls=st.lists(st.sampled_from(["train", "eval", "train_false", "none"]), min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_dropout_modules_follow_train_and_eval_as_pytorch_s(p, shape, calls, seed):
    """haaw had no nn.Dropout and no train()/eval(): the mode each module is in after the same calls, and what a
    Dropout computes in it, values and gradient, are torch's (its mask differs: another generator; every kept
    entry must be scaled by 1/(1 − p) and every dropped one be 0, in both)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(shape) + 3.0  # no entry is 0 by chance

    def build(lib):
        nn = haaw.nn if lib is haaw else torch.nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(p)
                self.inner = nn.ModuleList([nn.Dropout(p)]) if lib is torch else [nn.Dropout(p)]

            def forward(self, x):
                return self.drop(x)

        return Net()

    nets = build(haaw), build(torch)
    for call in calls:
        for net in nets:
            returned = {"train": net.train, "eval": net.eval, "train_false": lambda n=net: n.train(False),
                        "none": lambda n=net: n}[call]()
            assert returned is net
    ours, theirs = nets
    modes = [ours.training, ours.drop.training, ours.inner[0].training]
    assert modes == [theirs.training, theirs.drop.training, theirs.inner[0].training], f"modes after {calls}"
    x, tx = Tensor(data.copy(), requires_grad=True), as_torch(data)
    haaw.manual_seed(seed)
    outs = ours(x), theirs(tx)
    upstream = rng.standard_normal(shape)
    outs[0].backward(upstream)
    outs[1].backward(torch.tensor(upstream))
    for out, leaf, who in ((outs[0].data, x.grad, "haaw"), (outs[1].detach().numpy(), tx.grad.numpy(), "torch")):
        kept = out != 0
        if not ours.training or p == 0.0:
            assert kept.all(), f"{who}: an entry dropped in evaluation mode or with p = 0"
        elif p == 1.0:
            assert not kept.any(), f"{who}: an entry kept with p = 1"
        scale = np.where(kept, 1.0 / (1.0 - p) if ours.training and p < 1 else 1.0, 0.0)
        np.testing.assert_allclose(out, data * scale, rtol=1e-12, err_msg=f"{who}'s values after {calls}")
        np.testing.assert_allclose(leaf, upstream * scale, rtol=1e-12, err_msg=f"{who}'s gradient after {calls}")


# --- rarer edges: protocols, formats by name ----------------------------------------------------------------------------------------
def test_no_grad_on_a_generator_function_applies_inside_each_step_as_pytorch_s():
    """@no_grad() on a generator function did nothing inside it: the decorator's block ended when the call made the
    generator, before its first step. torch's applies to each step, and not to the caller's code between steps."""

    def steps(lib):
        x = lib.tensor([1.0], requires_grad=True) if lib is torch else Tensor([1.0], requires_grad=True)

        @lib.no_grad()
        def gen():
            got = yield (x * 2).requires_grad
            try:
                yield got, (x * 2).requires_grad
            except KeyError:
                yield "caught", (x * 2).requires_grad
            return "done"

        it = gen()
        seen = [next(it), (x * 3).requires_grad, it.send("sent"), (x * 3).requires_grad, it.throw(KeyError())]
        with pytest.raises(StopIteration) as stop:
            next(it)
        return seen + [stop.value.value, lib.is_grad_enabled() if lib is torch else haaw.engine.modes.grad_enabled()]

    assert steps(haaw) == steps(torch) == [False, True, ("sent", False), True, ("caught", False), "done", True]


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4)])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("name", ["max", "amax", "min", "amin"])
def test_max_over_an_empty_axis_is_refused_as_pytorch_refuses_it(shape, dim, name):
    """x.max() over an axis of length 0 raised NumPy's "zero-size array to reduction operation maximum which has no
    identity"; torch refuses with its own (IndexError for a dim, RuntimeError for all), and reduces over an axis
    that is not empty. (max and min take one dim: a tuple is amax's and amin's.)"""
    if isinstance(dim, tuple) and (len(shape) < 2 or name in ("max", "min")) or isinstance(dim, int) and dim >= len(shape):
        return
    data = np.zeros(shape)
    x, tx = Tensor(data, requires_grad=True), as_torch(data)
    reduce = (lambda t: getattr(t, name)()) if dim is None else (lambda t: getattr(t, name)(dim=dim))
    try:
        theirs = reduce(tx)
    except (IndexError, RuntimeError) as err:
        with pytest.raises(type(err), match="PyTorch refuses it too"):
            reduce(x)
        return
    ours = reduce(x)
    if isinstance(dim, int) and name in ("max", "min"):
        (ours, our_indices), (theirs, their_indices) = ours, theirs
        assert our_indices.shape == tuple(their_indices.shape) and our_indices.dtype == np.int64
    assert ours.shape == tuple(theirs.shape)


MAX_DATA = {  # each row has what the name says; float16 and bfloat16 hold every one of these exactly
    "distinct": [[0.5, -1.25, 3.0, 2.0], [4.0, 0.25, -2.0, 1.5], [-3.0, 6.0, 1.0, 0.75]],
    "ties": [[3.0, 1.0, 3.0, 3.0], [2.0, 2.0, 2.0, 2.0], [-1.0, 5.0, 0.0, 5.0]],
    "nan": [[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, 0.0, 1.0], [np.nan, 5.0, -5.0, 0.5]],
    "inf": [[np.inf, 1.0, np.inf, -np.inf], [-np.inf, -np.inf, -np.inf, -np.inf], [0.0, -0.0, 0.0, -0.0]],
}


@pytest.mark.parametrize("fmt", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rows", sorted(MAX_DATA))
@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, False), (-1, True), (-2, True), (1, True)])
@pytest.mark.parametrize("name", ["max", "min"])
def test_max_along_a_dim_gives_torch_s_values_indices_and_gradient(name, dim, keepdim, rows, fmt):
    """haaw's x.max(dim) returned the values alone, so values, indices = x.max(dim=1) unpacked the values' first two
    entries, silently. As torch's: the named tuple (values, indices), int64 indices of the first entry on ties, a nan
    counting as the largest and the smallest, and the gradient sent to that one index (torch 2.13, ties too)."""
    data = np.array(MAX_DATA[rows])
    x = Tensor(data, dtype=fmt, requires_grad=True)
    tx = torch.tensor(data, dtype=getattr(torch, fmt), requires_grad=True)
    ours, theirs = getattr(x, name)(dim, keepdim), getattr(tx, name)(dim, keepdim)
    assert type(ours).__name__ == name and ours._fields == ("values", "indices") and isinstance(ours, tuple)
    (values, indices), (their_values, their_indices) = ours, theirs  # unpacks as torch's does
    assert values is ours.values and indices is ours.indices
    assert values.dtype.name == fmt and indices.dtype == np.int64 and not indices.requires_grad
    np.testing.assert_array_equal(indices.data, their_indices.numpy())
    np.testing.assert_array_equal(values.to(np.float64).data, their_values.double().detach().numpy())
    up = np.random.default_rng(3).standard_normal(values.shape).round(2)
    values.backward(Tensor(up).to(fmt))
    their_values.backward(torch.tensor(up).to(getattr(torch, fmt)))
    np.testing.assert_array_equal(x.grad.astype(np.float64), tx.grad.double().numpy())


@pytest.mark.parametrize("name", ["max", "min"])
def test_the_max_habits_around_dim_match_torch(name):
    """The unpacking that went wrong (values, indices = x.max(dim=1), x of two rows), axis= and keepdims=, a 0-d
    tensor, integers and bools, x.max() over everything (ties share its gradient: torch 2.13), amax and amin."""
    data = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    x, tx = Tensor(data, requires_grad=True), as_torch(data)
    values, indices = getattr(x, name)(dim=1)
    their_values, their_indices = getattr(tx, name)(dim=1)
    compare(values, their_values, "values")
    np.testing.assert_array_equal(indices.data, their_indices.numpy())
    for ours, theirs in [(getattr(x, name)(axis=1, keepdims=True), getattr(tx, name)(axis=1, keepdims=True)),
                         (getattr(Tensor(np.array(5.0)), name)(-1), getattr(torch.tensor(np.array(5.0)), name)(-1)),
                         (getattr(Tensor(np.array([[3, 7, 7]])), name)(1), getattr(torch.tensor([[3, 7, 7]]), name)(1)),
                         (getattr(Tensor(np.array([[False, True]])), name)(1),
                          getattr(torch.tensor([[False, True]]), name)(1))]:
        for a, b in zip(ours, theirs):
            assert a.shape == tuple(b.shape) and a.dtype.name == str(b.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(a.data, b.detach().numpy())
    for reduce in (lambda t: getattr(t, name)(), lambda t: getattr(t, "a" + name)(dim=(0, 1)),
                   lambda t: getattr(t, "a" + name)(1, keepdim=True)):
        x.grad, tx.grad = None, None
        ours, theirs = reduce(x), reduce(tx)
        compare(ours, theirs, "values")
        ours.sum().backward()
        theirs.sum().backward()
        compare(x.grad, tx.grad, "gradient")


@pytest.mark.parametrize("fmt", ["float64", "float32"])
@pytest.mark.parametrize("rows", sorted(MAX_DATA))
@pytest.mark.parametrize("name", ["max", "min", "amax", "amin"])
def test_a_reduction_without_dim_sends_the_gradient_where_torch_does_nan_included(name, rows, fmt):
    """x.max() of a tensor holding nan is nan, and torch 2.13 shares its gradient between the nans; haaw compared
    every entry with nan, found no winner and gave every entry 0/0 = nan, with NumPy's warning. amax over a slice
    holding nan gives nan in both (its gradient is nan there), without a warning from haaw."""
    data = np.array(MAX_DATA[rows])
    x = Tensor(data, dtype=fmt, requires_grad=True)
    tx = torch.tensor(data, dtype=getattr(torch, fmt), requires_grad=True)
    reduce = (lambda t: getattr(t, name)()) if name in ("max", "min") else (lambda t: getattr(t, name)(1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NumPy's "invalid value encountered in divide" fails the test
        ours = reduce(x)
        ours.backward(Tensor(np.ones(ours.shape), dtype=fmt))
    theirs = reduce(tx)
    theirs.backward(torch.ones_like(theirs))
    np.testing.assert_array_equal(ours.to(np.float64).data, theirs.double().detach().numpy())
    np.testing.assert_array_equal(x.grad.astype(np.float64), tx.grad.double().numpy())


@pytest.mark.parametrize("number", [1000, -1000, 2**63 - 1, 2**63, 2**63 + 5, 2**64 - 1, -2**63, 2**64, -2**63 - 1])
@pytest.mark.parametrize("fmt", ["int8", "uint8", "int32", "int64"])
def test_a_python_int_with_an_integer_tensor_wraps_round_or_overflows_as_in_torch(number, fmt):
    """A Python int meets an integer tensor in the tensor's own format, wrapping round as torch does; haaw read it as
    int64 first, so an int in [2**63, 2**64), which torch wraps round, raised NumPy's OverflowError. Past that range
    both refuse with an OverflowError."""
    data = np.array([1, 2, -3], dtype=fmt) if fmt != "uint8" else np.array([1, 2, 3], dtype=fmt)
    try:
        theirs = (torch.tensor(data) * number).numpy()
    except OverflowError:
        with pytest.raises(OverflowError):
            Tensor(data) * number
        return
    ours = Tensor(data) * number
    assert ours.dtype == np.dtype(fmt)
    np.testing.assert_array_equal(ours.data, theirs)
    np.testing.assert_array_equal((number + Tensor(data)).data, (number + torch.tensor(data)).numpy())


@pytest.mark.parametrize("entries", [
    "0-d float64", "0-d float32", "0-d int32", "0-d requires grad", "one-entry 1-d", "nested", "in a tuple",
    "several entries", "nested one-entry 1-d", "nested one-entry float32", "nested one-entry 2-d", "three levels"])
def test_a_list_of_tensors_makes_a_tensor_as_torch_tensor_does(entries):
    """haaw.tensor([Tensor(1.), Tensor(2.)]) was refused ("setting an array element with a sequence"); torch.tensor
    reads each tensor of a list as its one number, keeping its dtype, and refuses a tensor of several numbers."""
    def make(lib):
        t = (lambda v, d: torch.tensor(v, dtype=getattr(torch, d))) if lib is torch else \
            (lambda v, d: Tensor(np.array(v, dtype=d)))
        return {"0-d float64": lambda: [t(1.5, "float64"), t(-2.0, "float64")],
                "0-d float32": lambda: [t(1.5, "float32"), t(-2.0, "float32")],
                "0-d int32": lambda: [t(3, "int32"), t(-4, "int32")],
                "0-d requires grad": lambda: [t(1.5, "float64").requires_grad_(), t(2.0, "float64")],
                "one-entry 1-d": lambda: [t([1.5], "float64"), t([2.5], "float64")],
                "nested": lambda: [[t(1.0, "float64"), t(2.0, "float64")], [t(3.0, "float64"), t(4.0, "float64")]],
                "in a tuple": lambda: (t(1.0, "float64"), t(2.0, "float64")),
                "several entries": lambda: [t([1.0, 2.0], "float64"), t([3.0, 4.0], "float64")],
                # NumPy read these tensors as arrays, one axis more each: shape (2, 1, 1) where torch gives (2, 1)
                "nested one-entry 1-d": lambda: [[t([1.5], "float64")], [t([2.5], "float64")]],
                "nested one-entry float32": lambda: [[t([1.5], "float32"), t([3.0], "float32")],
                                                     [t([2.5], "float32"), t([4.0], "float32")]],
                "nested one-entry 2-d": lambda: [[t([[1.5]], "float64")], [t([[2.5]], "float64")]],
                "three levels": lambda: [[[t([1.0], "float64")]], [[t([2.0], "float64")]]]}[entries]()

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns about copying a tensor that requires grad
            theirs = torch.tensor(make(torch))
    except (ValueError, TypeError, RuntimeError):
        with pytest.raises(TypeError, match="stack"):
            haaw.tensor(make(haaw))
        return
    ours = haaw.tensor(make(haaw))
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.data, theirs.numpy())
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.") and not ours.requires_grad


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("exponent", [np.float64(2.0), np.float32(0.5), np.int64(3), 2.0, 3])
def test_a_numpy_number_as_the_exponent_keeps_the_tensor_s_format_as_torch(fmt, exponent):
    """f32 ** np.float64(2) was float64: NumPy 2 lets a NumPy float64 widen a float32 array. torch keeps the
    tensor's format for any number, a NumPy one too."""
    data = np.array([0.5, 1.5, 3.0])
    x, tx = Tensor(data).to(fmt), torch.tensor(data).to(getattr(torch, fmt))
    ours, theirs = x ** exponent, tx ** exponent
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.to(np.float64).data, theirs.double().numpy(), rtol=1e-2 if fmt != "float64" else 1e-12)


def test_a_module_that_holds_its_parent_lists_each_parameter_once_as_torch():
    """A sub-module with a reference back to its parent made parameters() recurse until Python's limit; torch keeps
    a memo of the modules it has entered, and names each parameter once."""
    def build(lib):
        nn = haaw.nn if lib is haaw else torch.nn
        make = (lambda v: Tensor(v, requires_grad=True)) if lib is haaw else \
            (lambda v: torch.nn.Parameter(torch.tensor(v)))

        class Child(nn.Module):
            def __init__(self, parent):
                super().__init__()
                self.parent, self.w = parent, make([1.0, 2.0])

        class Parent(nn.Module):
            def __init__(self):
                super().__init__()
                self.child, self.v = Child(self), make([3.0])
                self.child.sibling = Child(self)

        return Parent()

    ours, theirs = build(haaw), build(torch)
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(n for n, _ in theirs.named_parameters())
    assert len(ours.parameters()) == len(list(theirs.parameters())) == 3
    assert len(list(ours.modules())) == len(list(theirs.modules())) == 3


@pytest.mark.parametrize("layer", ["Linear", "LayerNorm", "attention", "SelfAttention"])
def test_a_numpy_array_into_a_layer_is_refused_as_torch_refuses_it(layer):
    """A NumPy array passed to Linear, LayerNorm or attention died in haaw's insides ("'memoryview' object has no
    attribute 'dtype'"); torch refuses an ndarray with a TypeError that names the argument, and so does haaw now,
    saying what to write."""
    a = np.ones((2, 3, 4))
    calls = {"Linear": (lambda: haaw.nn.Linear(4, 2)(a), lambda: torch.nn.Linear(4, 2)(a)),
             "LayerNorm": (lambda: haaw.nn.LayerNorm(4)(a), lambda: torch.nn.LayerNorm(4)(a)),
             "attention": (lambda: F.scaled_dot_product_attention(a, a, a),
                           lambda: torch.nn.functional.scaled_dot_product_attention(a, a, a)),
             "SelfAttention": (lambda: haaw.nn.SelfAttention(4, 2)(a),
                               lambda: torch.nn.MultiheadAttention(4, 2, batch_first=True)(a, a, a))}[layer]
    with pytest.raises((TypeError, AttributeError)):  # MultiheadAttention: "'numpy.ndarray' has no attribute 'dim'"
        calls[1]()
    with pytest.raises(TypeError, match=r"must be a Tensor, not a NumPy array.*haaw\.tensor\("):
        calls[0]()


def test_a_hook_on_an_intermediate_a_checkpoint_captures_runs_once_as_torch_s():
    """torch's one pass hooks h once, on the sum of both paths; haaw hooked the recomputation's share and the
    enclosing pass's share separately (two calls, each share clipped alone). Now an intermediate fn used is a parent
    of the checkpoint's result, as in torch's graph, and the enclosing pass runs its hook once."""
    data = np.array([0.5, -1.5, 2.0])

    def build(lib):
        x = Tensor(data.copy(), requires_grad=True) if lib is haaw else as_torch(data)
        h = x * 2.0
        calls = []
        h.register_hook(lambda g: calls.append(1) or g.clip(-1, 1))
        inner = haaw.checkpoint(lambda a: (a * h).tanh(), x) if lib is haaw else \
            torch.utils.checkpoint.checkpoint(lambda a: (a * h).tanh(), x, use_reentrant=False)
        (inner.sum() + (h * h).sum()).backward()
        return len(calls), np.array(x.grad.detach().numpy() if lib is torch else x.grad)

    (our_calls, ours), (their_calls, theirs) = build(haaw), build(torch)
    assert our_calls == their_calls
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)



def test_hooks_on_intermediates_nested_checkpoints_use_run_once_as_torch_s():
    """A checkpoint inside a checkpoint, both using h and tanh(h) from outside: haaw called the two hooks five times
    (once per recomputation pass and once in the enclosing one) where torch calls each once, and x.grad differed."""
    data = np.array([0.5, -1.5, 2.0])

    def build(lib):
        x = Tensor(data.copy(), requires_grad=True) if lib is haaw else as_torch(data)
        ckpt = haaw.checkpoint if lib is haaw else \
            (lambda f, a: torch.utils.checkpoint.checkpoint(f, a, use_reentrant=False))
        h = x * 3.0
        g = h.tanh()
        calls = []
        h.register_hook(lambda grad: calls.append("h") or grad * 0.5)
        g.register_hook(lambda grad: calls.append("g") or grad.clip(-1, 1))
        out = ckpt(lambda a: ckpt(lambda b: (b * g * h).tanh(), a) * h, x)
        (out.sum() + (g * h).sum()).backward()
        return calls, np.array(x.grad.detach().numpy() if lib is torch else x.grad)

    (our_calls, ours), (their_calls, theirs) = build(haaw), build(torch)
    assert our_calls == their_calls == ["g", "h"]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


@pytest.mark.parametrize("other_path", [False, True], ids=["only through the Function", "and another path"])
def test_hooks_on_tensors_a_function_sends_no_gradient_are_called_with_none_as_torch_s(other_path):
    """A Function's backward returns None for b, computed from b0 through b1: torch calls the hooks of b, b1 and b0,
    in that order, each with None (haaw called none of them); with another path to b, once with its gradient."""
    a_data, b_data = np.array([1.0, 2.0]), np.array([0.3, -0.4])

    def build(lib):
        make = (lambda d: Tensor(d.copy(), requires_grad=True)) if lib is haaw else as_torch
        base = haaw.Function if lib is haaw else torch.autograd.Function

        class Drop(base):  # a·2 + b, whose backward gives b nothing
            @staticmethod
            def forward(ctx, a, b):
                return a * 2 + b

            @staticmethod
            def backward(ctx, g):
                return g * 2, None

        a, b0 = make(a_data), make(b_data)
        b1 = b0 * 3.0
        b = b1.tanh()
        seen = []
        for name, t in (("b0", b0), ("b1", b1), ("b", b)):
            t.register_hook(lambda g, name=name: seen.append((name, None if g is None else np.array(
                g if lib is haaw else g.numpy()))))
        loss = Drop.apply(a, b).sum()
        (loss + b.sum() if other_path else loss).backward()
        return seen, b0.grad

    (ours, our_grad), (theirs, their_grad) = build(haaw), build(torch)
    assert [name for name, _ in ours] == [name for name, _ in theirs] == ["b", "b1", "b0"]
    for (name, g), (_, tg) in zip(ours, theirs):
        assert (g is None) == (tg is None) == (not other_path), name
        if tg is not None:
            np.testing.assert_allclose(g, tg, rtol=1e-9)
    assert (our_grad is None) == (their_grad is None)


@pytest.mark.parametrize("shapes", [((4,), (4,), (4,)), ((3, 4), (4,), (4,)), ((4,), (3, 4), (3, 4)),
                                    ((3, 4), (3, 4), (4,)), ((3, 4), (4,), (3, 4)), ((), (), ())], ids=str)
def test_attention_with_fewer_than_two_axes_is_refused_as_torch_refuses_it(shapes):
    """A key of one axis raised a bare IndexError (key.shape[-2]), and a 1-D query or value NumPy's or matmul's
    message; torch refuses every q, k, v of fewer than 2 axes with a RuntimeError that gives each one's dims."""
    q, k, v = (np.ones(s) for s in shapes)
    with pytest.raises(RuntimeError, match="at least 2 dimensional"):
        torch.nn.functional.scaled_dot_product_attention(as_torch(q), as_torch(k), as_torch(v))
    with pytest.raises(RuntimeError) as refused:
        F.scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v))
    assert str(refused.value) == (
        f"attention: query, key and value need at least 2 axes each, (..., positions, features), as in PyTorch; got "
        f"query {shapes[0]}, key {shapes[1]}, value {shapes[2]}. One vector of d features is one position: write it "
        "as t.reshape(1, d)")


@FEW
@given(op=st.sampled_from(["mul", "div", "matmul", "linear", "add"]), wants=st.sampled_from([(1, 0), (0, 1), (1, 1)]),
       edited=st.sampled_from([0, 1, "out"]), seed=st.integers(0, 2**16))
def test_an_input_edited_in_place_is_refused_only_where_a_wanted_gradient_reads_it(op, wants, edited, seed):
    """y = op(a, w), then one of a, w or y edited in place, then backward. PyTorch saves an array only for a
    gradient that is wanted (a·w with only w requiring grad saves a alone), so it refuses exactly when a wanted
    gradient would read the edited array; haaw refused every edit of a saved array (68 of 1,212 fuzzed programs
    PyTorch runs)."""
    rng = np.random.default_rng(seed)
    a_data, w_data = rng.standard_normal((3, 2)), rng.uniform(0.5, 2.0, (2, 2) if op in ("matmul", "linear") else (3, 2))
    bias = rng.standard_normal(2)

    def run(lib, make):
        # haaw's linear takes its weight as (in, out), PyTorch's as (out, in): the same numbers, transposed
        a, w = make(a_data.copy(), wants[0]), make(w_data.T.copy() if op == "linear" and lib is torch else
                                                   w_data.copy(), wants[1])
        functional = F if lib is haaw else torch.nn.functional
        y = {"mul": lambda: a * w, "div": lambda: a / w, "matmul": lambda: a @ w, "add": lambda: a + w,
             "linear": lambda: functional.linear(a, w, make(bias.copy(), False))}[op]()
        with lib.no_grad():
            target = y if edited == "out" else (a, w)[edited]
            target += 1.0
        try:
            y.sum().backward()
        except RuntimeError:
            return "refused", None
        grads = [t.grad for t in (a, w)]
        return "ran", [None if g is None else np.asarray(g if lib is haaw else g.numpy()) for g in grads]

    mine = run(haaw, lambda d, r: Tensor(d, requires_grad=bool(r)))
    theirs = run(torch, lambda d, r: torch.tensor(d, requires_grad=bool(r)))
    assert mine[0] == theirs[0], f"{op}, gradients wanted {wants}, edited {edited}: haaw {mine[0]}, torch {theirs[0]}"
    if mine[0] == "ran":
        for g, tg, name in zip(mine[1], theirs[1], "aw"):
            if tg is None:
                assert g is None, name
            else:
                compare(g, tg.T if (op == "linear" and name == "w") else tg, f"d/d{name}")


# --- PyTorch habits on a Tensor, found by trying them on both sides: the same results, gradients and refusals ----
HABITS = [
    # var and std read their arguments in PyTorch's order (dim, unbiased, keepdim): x.var(0, False) was the unbiased
    # variance with keepdim=False in haaw, silently, and x.var(0, True) kept the axis
    "x.var(0, False)", "x.std(0, False)", "x.var(False)", "x.std(True)", "x.var(0, True, True)",
    "x.var(dim=1, unbiased=False)", "x.std(1, keepdim=True)", "x.var(1, correction=0)",
    "x.unsqueeze(-1)", "x.unsqueeze(0)", "x.unsqueeze(1)", "x.squeeze(0)", "x[:1].squeeze(0)", "x[:1].squeeze()",
    "x[:1].squeeze((0, 1))", "x.flatten()", "z.flatten(1)", "z.flatten(0, 1)", "x.sum().flatten()",
    "x.expand(2, 4, 3)", "x[:, :1].expand(-1, 3)", "x[:1].expand((4, 3))",
    "x.argmax()", "x.argmax(dim=1)", "x.argmin(0, keepdim=True)", "x.argmax(keepdim=True)", "x.sum().argmax(dim=0)",
    "x.sum(dtype=F32)", "x.mean(0, dtype=F32)", "x.new_zeros((2, 2))", "x.new_ones(3)", "x.new_full((2,), 7.0)",
    "x.dim()", "x.tolist()", "x.sum().tolist()",
    # torch warns that a number taken out of a tensor that requires grad leaves the graph; haaw has nothing to warn of
    pytest.param("float(x[0, 0])", marks=pytest.mark.filterwarnings(
        "ignore:Converting a tensor with requires_grad=True to a scalar:UserWarning")),
    "int(x[1, 2] * 3)",
]


@pytest.mark.parametrize("code", HABITS)
def test_a_pytorch_habit_on_a_tensor_gives_torch_s_result_and_gradient(code):
    """Each was missing (an AttributeError), or, for var and std, read its second argument as keepdim where torch
    reads unbiased. Compared: the value, shape and dtype; then, for a result in the graph, the gradients."""
    data = {"x": np.random.default_rng(5).standard_normal((4, 3)),
            "z": np.random.default_rng(6).standard_normal((2, 3, 4))}

    def run(lib):
        ns = {name: Tensor(a.copy(), requires_grad=True) if lib is haaw else as_torch(a) for name, a in data.items()}
        out = eval(code, {"F32": np.float32 if lib is haaw else torch.float32}, ns)
        grads = None
        if getattr(out, "requires_grad", False):
            up = np.random.default_rng(7).standard_normal(tuple(out.shape))
            out.backward(up if lib is haaw else torch.tensor(up, dtype=out.dtype))
            grads = [np.asarray(t.grad if lib is haaw else t.grad.numpy()) if t.grad is not None else None
                     for t in ns.values()]
        if isinstance(out, (Tensor, torch.Tensor)):
            out = (np.asarray(out.data if lib is haaw else out.detach().numpy()), str(out.dtype).removeprefix("torch."))
        return out, grads

    (ours, our_grads), (theirs, their_grads) = run(haaw), run(torch)
    if isinstance(theirs, tuple):
        assert ours[1] == theirs[1] and ours[0].shape == theirs[0].shape, (ours, theirs)
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6 if theirs[1] == "float32" else 1e-12)
    else:
        assert type(ours) is type(theirs)  # a list, a float, an int
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    assert (our_grads is None) == (their_grads is None)
    for g, tg in zip(our_grads or (), their_grads or ()):
        assert (g is None) == (tg is None)
        if tg is not None:
            np.testing.assert_allclose(g, tg, rtol=1e-6)


@pytest.mark.parametrize("code, error", [
    ("x.item()", RuntimeError), ("float(x)", ValueError), ("int(x[0])", ValueError),
    ("x.var(0, True, correction=0)", TypeError), ("x.var(0, 1)", TypeError), ("x.var(False, True)", TypeError),
    ("x.unsqueeze(3)", IndexError), ("x.expand(3, 3)", RuntimeError), ("x.flatten(1, 0)", RuntimeError),
    ("x.sum(out=x)", TypeError)])
def test_a_pytorch_habit_torch_refuses_is_refused_in_haaw_by_name(code, error):
    """haaw's refusals are its own words, and of the same kind as torch's where the habit is a value error (a tensor
    of several numbers given where one is wanted); the expand of a length-4 axis to 3 is a ValueError in haaw."""
    data = np.random.default_rng(5).standard_normal((4, 3))
    with pytest.raises((error, TypeError)):
        eval(code, {}, {"x": as_torch(data)})
    ours = ValueError if code.startswith("x.expand") else error
    with pytest.raises(ours) as refused:
        eval(code, {}, {"x": Tensor(data.copy(), requires_grad=True)})
    name = code.split("(")[0].removeprefix("x.")
    assert name in str(refused.value) or "unbiased" in str(refused.value), str(refused.value)
