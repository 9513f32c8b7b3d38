"""Every tensor operation: its forward computation, and right under it, its vector-Jacobian products.

An operation is a function ``forward(ctx, *arrays, **params)`` that returns its result and keeps on
``ctx`` what its backward will need (``ctx.a = a``): those attributes are its *saved values*, so
they can be counted (notebook 06) and checked for in-place edits (notebook 08). Under it,
``defvjp(forward, vjp_a, vjp_b, ...)`` registers the operation with one vector-Jacobian product per
input: ``vjp(ctx, g)`` turns g = dL/d(output) into dL/d(that input). The engine calls only the VJPs
of inputs that need a gradient, so a VJP never has to ask. ``flops`` says what forward and backward
cost. ``OPS``, filled by ``defvjp``, is the table that tests walk.

Broadcasting is undone in one place, ``unbroadcast``: an input that was stretched to a larger shape
in the forward pass receives the sum of the gradient over the stretched dimensions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import guard, plugins


class Context:
    """What one recorded operation keeps for its backward pass.

    ``op``, ``needs_input_grad``, ``versions`` and ``slots`` (the functions in haaw.use's slots when the forward
    ran, which its backward will call) are filled in by the engine; every other attribute was put there by the
    forward function and is a saved value (``ctx.saved`` lists them by name).
    """

    __slots__ = ("op", "needs_input_grad", "versions", "slots", "__dict__")

    def __init__(self, op=None, needs_input_grad=()):
        self.op, self.needs_input_grad, self.versions, self.slots = op, needs_input_grad, (), None

    @property
    def saved(self) -> dict:
        return vars(self)

    def save_for_backward(self, *arrays) -> None:
        """PyTorch's spelling, for custom operations: read them back as ``ctx.saved_tensors``."""
        self.saved_tensors = arrays


# --- flop conventions: one multiply or one add is one flop -----------------------------------
def _elementwise(inputs, out, needs):
    return out.size, out.size * sum(needs)


def _reduction(inputs, out, needs):
    return inputs[0].size, inputs[0].size * sum(needs)


def no_flops(inputs, out, needs):
    """The FLOP count of an operation that only moves, copies or views data: none, forward or backward."""
    return 0, 0


def _matmul_flops(inputs, out, needs):
    forward = 2 * out.size * inputs[0].shape[-1]  # each output entry: k multiplies and k adds
    return forward, forward * sum(needs)  # each gradient is one matmul of the same size


def _linear_flops(inputs, out, needs):
    forward = 2 * out.size * inputs[0].shape[-1]  # k multiplies, k − 1 adds and the bias: 2k per entry
    return forward, forward * (needs[0] + needs[1]) + out.size * needs[2]  # the bias: a sum over rows


@dataclass
class Op:
    name: str
    forward: Callable
    vjps: tuple = ()  # one vjp(ctx, g) per input, in argument order
    vjp_all: Callable | None = None  # or one vjp(ctx, g) -> a gradient for every input (any number)
    flops: Callable = _elementwise
    view: bool = False  # the result may share memory with the first input (reshape, slices, ...)
    always_record: bool = False  # record even when no input needs a gradient (checkpoint: fn's parameters do)
    slot: str | None = None  # a haaw.use slot: your function there, when one is in use, is the whole backward
    keep: Callable | None = None  # keep(ctx, *inputs): what forward saves, without computing (selective checkpoints)


OPS: dict[str, Op] = {}


def defvjp(forward, *vjps, vjp_all=None, flops=_elementwise, view=False) -> Op:
    """Register ``forward`` with its vector-Jacobian products, under the function's own name. Each VJP refuses to
    run while a learner's function computes a backward in its place (guard.py)."""
    vjp = guard.refusable("ops.vjp", "a vector-Jacobian product from the engine's table of operations")
    op = Op(forward.__name__.removesuffix("_"), forward, tuple(map(vjp, vjps)), vjp_all and vjp(vjp_all), flops, view)
    OPS[op.name] = op
    return op


# --- helpers every VJP may use ---------------------------------------------------------------
@guard.refusable("ops.unbroadcast", "the engine's unbroadcast")
def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``g`` down to ``shape``: over the leading dimensions broadcasting added, and over
    every dimension that was 1 in the input and was stretched."""
    yours = plugins.override("unbroadcast")
    if yours:
        return yours(g, shape)
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra:
        g = _sum(g, axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if stretched:
        g = _sum(g, axis=stretched, keepdims=True)
    return g


def _sum(a: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    """np.sum, accumulating 16- and 8-bit formats in float32 and rounding the total back; integers in int64.

    Summing in bfloat16 itself stalls: past 2048 the spacing between bfloat16 numbers is 16, so
    adding values below 8 changes nothing. Hardware and frameworks accumulate in fp32; so do we.
    """
    if a.dtype.kind in "biu":  # integers and booleans count in int64, as PyTorch's sum does (an int8 total overflows)
        return np.asarray(a.sum(axis=axis, keepdims=keepdims, dtype=np.int64))
    if a.dtype.itemsize >= 4:
        return a.sum(axis=axis, keepdims=keepdims)
    return np.asarray(a.sum(axis=axis, keepdims=keepdims, dtype=np.float32)).astype(a.dtype)


def _as(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` in ``dtype``: rounded into it, or ``a`` itself when it is already in it (no copy)."""
    return a.astype(dtype, copy=False)


def _mm(a, b):
    """a @ b. 16- and 8-bit formats multiply in float32 and round the result back, as
    accelerators do (and NumPy has no fast float16 matmul of its own); 8- and 16-bit integers in int64."""
    kind = np.result_type(a, b)
    if kind.itemsize >= 4:
        return a @ b
    if kind.kind in "biu":  # integers exactly, in int64 (float32 is off by one past 2^24), then wrapped round as PyTorch
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(kind)
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(kind)


def _T(a):
    """Swap the last two axes: the transpose of a matrix, or of each matrix in a batch."""
    return a.swapaxes(-1, -2)


# --- arithmetic ---------------------------------------------------------------------------------
def add(ctx, a, b):
    ctx.a_shape, ctx.b_shape = a.shape, b.shape
    return a + b


defvjp(add, lambda ctx, g: unbroadcast(g, ctx.a_shape),
            lambda ctx, g: unbroadcast(g, ctx.b_shape).copy())  # copy: two inputs never share one array


def sub(ctx, a, b):
    ctx.a_shape, ctx.b_shape = a.shape, b.shape
    return a - b


defvjp(sub, lambda ctx, g: unbroadcast(g, ctx.a_shape),
            lambda ctx, g: unbroadcast(-g, ctx.b_shape))


def mul(ctx, a, b):
    ctx.a, ctx.b = a, b
    return a * b


defvjp(mul, lambda ctx, g: unbroadcast(g * ctx.b, ctx.a.shape),
            lambda ctx, g: unbroadcast(g * ctx.a, ctx.b.shape))


def div(ctx, a, b):
    ctx.a, ctx.b = a, b
    return a / b


defvjp(div, lambda ctx, g: unbroadcast(g / ctx.b, ctx.a.shape),
            lambda ctx, g: unbroadcast(-(g * (ctx.a / ctx.b)) / ctx.b, ctx.b.shape))  # b·b would under- or overflow


def pow(ctx, a, exponent):
    ctx.a, ctx.exponent = a, exponent
    return _power(a, exponent)


def _pow_vjp(ctx, g):
    if ctx.exponent == 0:  # a⁰ = 1 everywhere, so its slope is 0 everywhere, even at a = 0
        return np.zeros_like(g)
    return g * ctx.exponent * _power(ctx.a, ctx.exponent - 1)


def _power(a, n):
    """aⁿ. A cube is two products: NumPy hands a**3 to its general power routine, about 100 times slower
    (it squares by a fast path already). Notebook 10 times the difference."""
    if n == 3:
        return a * a * a
    return a**n


defvjp(pow, _pow_vjp)


def neg(ctx, a):
    return -a


defvjp(neg, lambda ctx, g: -g)


def matmul(ctx, a, b):
    ctx.a, ctx.b = a, b
    return _mm(a, b)


defvjp(matmul, lambda ctx, g: unbroadcast(_mm(g, _T(ctx.b)), ctx.a.shape),  # dA = G Bᵀ
               lambda ctx, g: unbroadcast(_mm(_T(ctx.a), g), ctx.b.shape),  # dB = Aᵀ G
       flops=_matmul_flops)


def _keep_matmul(ctx, a, b):
    ctx.a, ctx.b = a, b


OPS["matmul"].keep = _keep_matmul


def linear(ctx, x, w, b):
    """Y = XW + b in one step (the layer of notebook 03): b is added to every row of XW."""
    ctx.x, ctx.w, ctx.b_shape = x, w, b.shape
    out = _mm(x, w)
    out += b  # in place: XW is a fresh array, so no second (batch × outputs) array is made
    return out


defvjp(linear, lambda ctx, g: unbroadcast(_mm(g, _T(ctx.w)), ctx.x.shape),  # dX = G Wᵀ
               lambda ctx, g: unbroadcast(_mm(_T(ctx.x), g), ctx.w.shape),  # dW = Xᵀ G
               lambda ctx, g: unbroadcast(g, ctx.b_shape).copy(),  # db = G summed over the batch
       flops=_linear_flops)


def _keep_linear(ctx, x, w, b):
    ctx.x, ctx.w, ctx.b_shape = x, w, b.shape


OPS["linear"].keep = _keep_linear


# --- elementwise functions ------------------------------------------------------------------------
def exp(ctx, a):
    ctx.out = out = np.exp(a)
    return out


defvjp(exp, lambda ctx, g: g * ctx.out)  # (eᵃ)' = eᵃ: the output is all backward needs


def log(ctx, a):
    ctx.a = a
    return np.log(a)


defvjp(log, lambda ctx, g: g / ctx.a)


def tanh(ctx, a):
    ctx.out = out = np.tanh(a)
    return out


defvjp(tanh, lambda ctx, g: g * (1 - ctx.out * ctx.out))


def relu(ctx, a):
    ctx.out = out = np.maximum(a, 0)
    return out


# the output is positive exactly where the input was; nan passes the gradient on, as in PyTorch
defvjp(relu, lambda ctx, g: g * ~(ctx.out <= 0))


def sigmoid(ctx, a):
    ctx.out = out = _as(np.exp(-np.logaddexp(0, -a)), a.dtype)  # 1/(1+e⁻ᵃ), never overflows
    return out


defvjp(sigmoid, lambda ctx, g: g * ctx.out * (1 - ctx.out))


def clamp(ctx, a, min=None, max=None):
    """Every entry moved into [min, max]; one bound may be None. The slope is 1 where the entry was inside,
    bounds included (PyTorch's choice at the kinks), 0 where it was moved."""
    ctx.inside = np.ones(a.shape, dtype=bool) if min is None else a >= min
    if max is not None:
        ctx.inside &= a <= max
    return np.clip(a, min, max)


defvjp(clamp, lambda ctx, g: g * ctx.inside)


def where(ctx, a, b, condition):
    """``a`` where ``condition`` is True, ``b`` elsewhere (all three broadcast); each gets the gradient of its own
    entries. The condition is copied: changed in place before backward, it would send the gradient elsewhere."""
    ctx.condition, ctx.a_shape, ctx.b_shape = np.array(condition, dtype=bool), a.shape, b.shape
    return np.where(ctx.condition, a, b)


defvjp(where, lambda ctx, g: unbroadcast(_as(np.where(ctx.condition, g, 0), g.dtype), ctx.a_shape),
              lambda ctx, g: unbroadcast(_as(np.where(ctx.condition, 0, g), g.dtype), ctx.b_shape))


# --- reductions over ``dim`` (a tuple of non-negative axes, or None for all) -----------------------
def _reduce(ctx, a, dim):
    """What every reduction's backward needs: the input's shape, and that shape with the reduced axes as 1."""
    ctx.shape = a.shape
    ctx.kept = tuple(1 if dim is None or i in dim else n for i, n in enumerate(a.shape))


def _spread(ctx, g):
    """A reduced gradient, back on the input's shape: each entry gets the value of its reduced slot."""
    if g.size == 1:
        return np.full(ctx.shape, g.item(), dtype=g.dtype)
    return np.broadcast_to(g.reshape(ctx.kept), ctx.shape)


def sum_(ctx, a, dim=None, keepdim=False):
    _reduce(ctx, a, dim)
    return _sum(a, axis=dim, keepdims=keepdim)


defvjp(sum_, _spread, flops=_reduction)


def mean(ctx, a, dim=None, keepdim=False):
    _reduce(ctx, a, dim)
    ctx.count = math.prod(n for i, n in enumerate(a.shape) if dim is None or i in dim)  # the entries averaged
    return _divide(a.sum(axis=dim, keepdims=keepdim, dtype=_wide(a.dtype)), ctx.count, a.dtype)


defvjp(mean, lambda ctx, g: _spread(ctx, _divide(g, ctx.count, g.dtype)), flops=_reduction)


def _wide(dtype):
    """float32 for 16- and 8-bit formats (whose own range may not even hold the count), else None."""
    return np.float32 if dtype.itemsize < 4 else None


def _divide(total, count: int, dtype):
    with np.errstate(invalid="ignore", divide="ignore"):  # count 0: a mean of no entries is nan
        return _as(np.asarray(total, dtype=_wide(dtype)) / count, dtype)


def max_(ctx, a, dim=None, keepdim=False, index=None):
    """The largest entry over ``dim``; see ``_extreme``."""
    return _extreme(ctx, a, dim, keepdim, index, np.max)


def min_(ctx, a, dim=None, keepdim=False, index=None):
    """The smallest entry over ``dim``; see ``_extreme``."""
    return _extreme(ctx, a, dim, keepdim, index, np.min)


def _extreme(ctx, a, dim, keepdim, index, reduce):
    """Without ``index``: ``reduce`` (np.max or np.min) over ``dim``; entries that tie share the gradient, as
    PyTorch's ``x.max()``. With ``index`` (where the chosen entry of each slice along the one axis ``dim`` is, that
    axis kept as 1): the entry there, which alone gets the gradient, as with PyTorch's ``x.max(dim)``."""
    _reduce(ctx, a, dim)
    if index is not None:
        ctx.index, ctx.axis, ctx.dtype = index, dim[0], a.dtype
        out = np.take_along_axis(a, index, axis=dim[0])
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(a.shape) if i != dim[0]))
    ctx.a, ctx.whole = a, dim is None
    ctx.out = out = reduce(a, axis=dim, keepdims=keepdim)
    return out


def _max_vjp(ctx, g):
    """With an index: the gradient goes to the one entry picked. Without: to the entries that were the maximum (or
    minimum), shared equally between ties; for ``x.max()`` of a tensor holding nan, between its nans."""
    if hasattr(ctx, "index"):
        grad = np.zeros(ctx.shape, dtype=ctx.dtype)
        np.put_along_axis(grad, ctx.index, g.reshape(ctx.index.shape), axis=ctx.axis)
        return grad
    top = ctx.out.reshape(ctx.kept)
    # x.max() of a tensor holding nan is nan: PyTorch shares its gradient between the nans (amax gives nan)
    winners = np.isnan(ctx.a) if ctx.whole and np.isnan(top).any() else ctx.a == top
    with np.errstate(invalid="ignore"):  # amax over a slice holding nan: no winner, 0/0, nan as in PyTorch
        share = winners / winners.sum(axis=tuple(i for i, n in enumerate(ctx.kept) if n == 1), keepdims=True)
    return _as(g.reshape(ctx.kept) * share, ctx.a.dtype)


defvjp(max_, _max_vjp, flops=_reduction)
defvjp(min_, _max_vjp, flops=_reduction)


# --- shapes and indexing ------------------------------------------------------------------------------
def reshape(ctx, a, shape):
    ctx.shape = a.shape
    return a.reshape(shape)


defvjp(reshape, lambda ctx, g: g.reshape(ctx.shape), flops=no_flops, view=True)


def permute(ctx, a, dims):
    ctx.dims = dims
    return np.transpose(a, dims)


defvjp(permute, lambda ctx, g: np.transpose(g, np.argsort(ctx.dims)), flops=no_flops, view=True)


def cast(ctx, a, dtype):
    ctx.dtype = a.dtype
    return a.astype(dtype)


defvjp(cast, lambda ctx, g: g.astype(ctx.dtype), flops=no_flops)  # the gradient goes back in the input's format


def getitem(ctx, a, index):
    # index arrays are copied: changed in place before backward, they would send the gradient elsewhere
    ctx.shape, ctx.dtype, ctx.index = a.shape, a.dtype, _own(index)
    return a[ctx.index]


def _own(index):
    """The index with every array or list in it copied (a list becomes the array NumPy reads it as)."""
    if isinstance(index, tuple):
        return tuple(_own(i) for i in index)
    if isinstance(index, (np.ndarray, list)):
        return np.array(index)
    return index


def _getitem_vjp(ctx, g):
    """Scatter back into zeros; ``add.at`` adds up entries picked more than once."""
    grad = np.zeros(ctx.shape, dtype=ctx.dtype)
    np.add.at(grad, ctx.index, g)
    return grad


defvjp(getitem, _getitem_vjp, flops=no_flops, view=True)


def cat(ctx, *arrays, dim=0):
    ctx.sizes, ctx.dim = [a.shape[dim] for a in arrays], dim
    return np.concatenate(arrays, axis=dim)


defvjp(cat, vjp_all=lambda ctx, g: np.split(g, np.cumsum(ctx.sizes)[:-1], axis=ctx.dim), flops=no_flops)


# --- softmax and its family ------------------------------------------------------------------------
def _softmax_vjp(ctx, g):
    """s ⊙ (g − ⟨g, s⟩): the Jacobian diag(s) − ssᵀ applied to g, never built."""
    s = ctx.out
    return s * (g - _sum(g * s, axis=ctx.dim, keepdims=True))


def _top(a, dim):
    """The largest entry along ``dim`` (kept as an axis of 1), or 0 where that axis is empty: no entries."""
    if a.size == 0:
        return np.zeros([1 if i == dim % a.ndim else n for i, n in enumerate(a.shape)], dtype=a.dtype)
    return np.max(a, axis=dim, keepdims=True)


def softmax(ctx, a, dim=-1):
    wide = a if _wide(a.dtype) is None else a.astype(np.float32)  # 16 bits: in float32, rounded once at the end
    shifted = np.exp(wide - _top(wide, dim))  # the same result, and no overflow
    ctx.out, ctx.dim = _as(shifted / shifted.sum(axis=dim, keepdims=True), a.dtype), dim
    return ctx.out  # (a float16 total of more than 65,504 entries would be inf, and every weight 0)


defvjp(softmax, _softmax_vjp)


def masked_softmax(ctx, a, mask, dim=-1):
    """Softmax over the entries where ``mask`` is True; the others get exactly 0.

    A row with no True entry at all (everything masked) gets all zeros, not 0/0 = NaN, and so
    does its gradient: a padded query that may attend to nothing contributes nothing.
    """
    top = np.max(np.where(mask, a, -np.inf), axis=dim, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    weights = _as(np.where(mask, np.exp(np.where(mask, a, 0) - top), 0), a.dtype)
    total = weights.sum(axis=dim, keepdims=True, dtype=_wide(a.dtype))  # unrounded, as in softmax
    ctx.out, ctx.dim = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0), dim
    return ctx.out


defvjp(masked_softmax, _softmax_vjp)  # the same formula: s is 0 where masked, so those entries get 0


def log_softmax(ctx, a, dim=-1):
    shifted = a - _top(a, dim)
    with np.errstate(divide="ignore"):  # an empty axis: log 0 = -inf for rows that have no entries to hold it
        ctx.out, ctx.dim = shifted - np.log(_sum(np.exp(shifted), axis=dim, keepdims=True)), dim
    return ctx.out


defvjp(log_softmax, lambda ctx, g: g - np.exp(ctx.out) * _sum(g, axis=ctx.dim, keepdims=True))


def cross_entropy_rows(ctx, logits, targets):
    """−log softmax(logits)[target] for each row of 2-D logits; targets are integer class ids."""
    shifted = logits - np.max(logits, axis=-1, keepdims=True)
    targets = np.array(targets)  # a copy: targets changed in place before backward must not change the gradient
    ctx.logp, ctx.targets = shifted - np.log(_sum(np.exp(shifted), axis=-1, keepdims=True)), targets
    return -ctx.logp[np.arange(len(targets)), targets]


def _cross_entropy_rows_vjp(ctx, g):
    """softmax(logits) − onehot(target), each row scaled by its upstream gradient."""
    grad = np.exp(ctx.logp)
    grad[np.arange(len(ctx.targets)), ctx.targets] -= 1
    return grad * g[:, None]


defvjp(cross_entropy_rows, _cross_entropy_rows_vjp, flops=_reduction)


# --- slots where your own code can run instead (haaw.use, notebooks 03 to 05) -----------------
# An operation with a slot calls, when its backward runs (Tensor._vjp), your function if it was in use when its
# forward ran (ctx.slots); the adapter hands your function what it expects from what the forward pass saved.
def _last_axis(fn):
    """Your function works on the last axis; the operation may have run along another."""
    return lambda ctx, g: (np.moveaxis(np.asarray(fn(np.moveaxis(ctx.out, ctx.dim, -1), np.moveaxis(g, ctx.dim, -1))),
                                       -1, ctx.dim),)


for _name, _slot in (("linear", "linear"), ("tanh", "tanh"), ("relu", "relu"), ("softmax", "softmax"),
                     ("masked_softmax", "softmax")):
    OPS[_name].slot = _slot
plugins.slot("linear", "linear_backward(X, W, G) -> (dX, dW, db) for Y = XW + b",
             lambda fn: lambda ctx, g: fn(ctx.x, ctx.w, g))
plugins.slot("unbroadcast", "unbroadcast(g, shape) -> g summed down to shape", refuses=("ops.unbroadcast",))
plugins.slot("tanh", "tanh_backward(y, G) -> dL/dx, where y = tanh(x)", lambda fn: lambda ctx, g: (fn(ctx.out, g),))
plugins.slot("relu", "relu_backward(y, G) -> dL/dx, where y = relu(x)", lambda fn: lambda ctx, g: (fn(ctx.out, g),))
plugins.slot("softmax", "softmax_backward(s, G) -> dL/dz along the last axis, where s = softmax(z)", _last_axis)


# Cross-entropy (notebook 03): your function differentiates the mean over the B rows, (P − T)/B; this operation
# returns one loss per row and receives one upstream gradient g[b] per row, so row b's gradient is B · yours[b] · g[b].
# Your function gets the log-probabilities the forward kept: they differ from the logits by one number per row,
# which changes neither the softmax nor the loss (the very reason subtracting the max is safe).
def _rows_of_a_mean(fn):
    def vjp(ctx, g):
        out = fn(ctx.logp, ctx.targets)
        grad = np.asarray(out[1] if isinstance(out, (tuple, list)) and len(out) == 2 else out)
        if grad.shape != ctx.logp.shape:
            return (grad,)  # the engine refuses it, naming the operation
        return (grad * (len(ctx.targets) * g[:, None]),)
    return vjp


OPS["cross_entropy_rows"].slot = "cross_entropy"
plugins.slot("cross_entropy", "cross_entropy_forward_backward(logits, targets) -> (loss, dL/dlogits) for the mean "
             "over the rows", _rows_of_a_mean, refuses=("nn.cross_entropy",))
