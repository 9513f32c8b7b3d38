"""Every tensor operation, its forward computation and its vector-Jacobian product side by side.

An operation's ``forward(*arrays, **params)`` returns ``(out, saved)``: the result and what its
backward will need (kept explicitly, so it can be counted). Its ``vjp(g, saved, needs, **params)``
receives g = dL/d(out) and returns dL/d(input) for each input, computing only those whose
``needs`` flag is set: nobody asked for the others, so they cost nothing. ``flops`` says what
the forward and the backward cost. The table ``OPS`` at the bottom is what tests walk.

Broadcasting is undone in one place, ``unbroadcast``: an input that was stretched to a larger
shape in the forward pass receives the sum of the gradient over the stretched dimensions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


def _sum(a: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    """np.sum, accumulating 16- and 8-bit formats in float32 and rounding the total back.

    Summing in bfloat16 itself stalls: past 2048 the spacing between bfloat16 numbers is 16, so
    adding values below 8 changes nothing. Hardware and frameworks accumulate in fp32; so do we.
    """
    if a.dtype.itemsize >= 4:
        return np.sum(a, axis=axis, keepdims=keepdims)
    return np.asarray(np.sum(a, axis=axis, keepdims=keepdims, dtype=np.float32)).astype(a.dtype)


def unbroadcast(g: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum ``g`` down to ``shape``: over the leading dimensions broadcasting added, and over
    every dimension that was 1 in the input and was stretched."""
    if g.shape == shape:
        return g
    extra = g.ndim - len(shape)
    if extra:
        g = _sum(g, axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if stretched:
        g = _sum(g, axis=stretched, keepdims=True)
    return g


def _normal_axes(axis, ndim) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.isscalar(axis) else tuple(axis)
    return tuple(a % ndim for a in axes)


def _expand(g, in_shape, axis, keepdims):
    """A reduced gradient, with the reduced axes put back (as size 1), ready to broadcast."""
    if not keepdims:
        g = np.expand_dims(g, _normal_axes(axis, len(in_shape)))
    return g


# --- flop conventions: one multiply or add is one flop ----------------------------------
def _elementwise(inputs, out, needs):
    return out.size, out.size * sum(needs)


def _reduction(inputs, out, needs):
    return inputs[0].size, inputs[0].size * sum(needs)


def _free(inputs, out, needs):  # only moves or views data
    return 0, 0


def _matmul_flops(inputs, out, needs):
    a, b = inputs
    forward = 2 * out.size * a.shape[-1]  # each output entry: k multiplies and k adds
    return forward, forward * sum(needs)  # each gradient is one matmul of the same size


@dataclass(frozen=True)
class Op:
    name: str
    forward: Callable
    vjp: Callable
    flops: Callable = _elementwise


# --- arithmetic ---------------------------------------------------------------------------
def add(a, b):
    return a + b, (a.shape, b.shape)


def add_vjp(g, saved, needs):
    a_shape, b_shape = saved
    da = unbroadcast(g, a_shape) if needs[0] else None
    db = unbroadcast(g, b_shape) if needs[1] else None
    if da is db and da is not None:
        db = db.copy()  # two inputs never receive one and the same array
    return da, db


def sub(a, b):
    return a - b, (a.shape, b.shape)


def sub_vjp(g, saved, needs):
    a_shape, b_shape = saved
    return (unbroadcast(g, a_shape) if needs[0] else None,
            unbroadcast(-g, b_shape) if needs[1] else None)


def mul(a, b):
    return a * b, (a, b)


def mul_vjp(g, saved, needs):
    a, b = saved
    return (unbroadcast(g * b, a.shape) if needs[0] else None,
            unbroadcast(g * a, b.shape) if needs[1] else None)


def div(a, b):
    return a / b, (a, b)


def div_vjp(g, saved, needs):
    a, b = saved
    return (unbroadcast(g / b, a.shape) if needs[0] else None,
            unbroadcast(-g * a / (b * b), b.shape) if needs[1] else None)


def power(a, exponent):
    return a**exponent, (a,)


def power_vjp(g, saved, needs, exponent):
    (a,) = saved
    return (g * exponent * a ** (exponent - 1),)


def neg(a):
    return -a, ()


def neg_vjp(g, saved, needs):
    return (-g,)


def _mm(a, b):
    """a @ b. 16-bit and 8-bit formats multiply in float32 and round the result back, as
    accelerators do (and NumPy has no fast float16 matmul of its own)."""
    kind = np.result_type(a, b)
    if kind.itemsize >= 4:
        return a @ b
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(kind)


def matmul(a, b):
    return _mm(a, b), (a, b)


def matmul_vjp(g, saved, needs):
    """Y = AB: dA = G Bᵀ and dB = Aᵀ G (batched: transpose the last two axes)."""
    a, b = saved
    da = unbroadcast(_mm(g, np.swapaxes(b, -1, -2)), a.shape) if needs[0] else None
    db = unbroadcast(_mm(np.swapaxes(a, -1, -2), g), b.shape) if needs[1] else None
    return da, db


# --- elementwise functions ------------------------------------------------------------------
def exp(a):
    out = np.exp(a)
    return out, (out,)


def exp_vjp(g, saved, needs):
    (out,) = saved
    return (g * out,)


def log(a):
    return np.log(a), (a,)


def log_vjp(g, saved, needs):
    (a,) = saved
    return (g / a,)


def tanh(a):
    out = np.tanh(a)
    return out, (out,)


def tanh_vjp(g, saved, needs):
    (out,) = saved
    return (g * (1 - out * out),)


def relu(a):
    out = np.maximum(a, 0)
    return out, (out,)


def relu_vjp(g, saved, needs):
    (out,) = saved  # the output is positive exactly where the input was
    return (g * (out > 0),)


def sigmoid(a):
    out = np.exp(-np.logaddexp(0, -a)).astype(a.dtype, copy=False)  # 1/(1+e^-a), never overflows
    return out, (out,)


def sigmoid_vjp(g, saved, needs):
    (out,) = saved
    return (g * out * (1 - out),)


# --- reductions -------------------------------------------------------------------------------
def sum_(a, axis=None, keepdims=False):
    return _sum(a, axis=axis, keepdims=keepdims), (a.shape,)


def sum_vjp(g, saved, needs, axis=None, keepdims=False):
    (shape,) = saved
    return (np.broadcast_to(_expand(g, shape, axis, keepdims), shape),)


def mean(a, axis=None, keepdims=False):
    count = int(np.prod([a.shape[i] for i in _normal_axes(axis, a.ndim)]))
    return (_sum(a, axis=axis, keepdims=keepdims) / count).astype(a.dtype, copy=False), (a.shape,)


def mean_vjp(g, saved, needs, axis=None, keepdims=False):
    (shape,) = saved
    count = int(np.prod([shape[i] for i in _normal_axes(axis, len(shape))]))
    return (np.broadcast_to(_expand(g, shape, axis, keepdims) / count, shape),)


def max_(a, axis=None, keepdims=False):
    out = np.max(a, axis=axis, keepdims=keepdims)
    return out, (a, out)


def max_vjp(g, saved, needs, axis=None, keepdims=False):
    """The gradient goes to the entries that were the maximum (shared equally between ties)."""
    a, out = saved
    winners = a == _expand(out, a.shape, axis, keepdims)
    share = winners / winners.sum(axis=_normal_axes(axis, a.ndim), keepdims=True)
    return ((_expand(g, a.shape, axis, keepdims) * share).astype(a.dtype, copy=False),)


# --- shapes and indexing ------------------------------------------------------------------------
def reshape(a, shape):
    return a.reshape(shape), (a.shape,)


def reshape_vjp(g, saved, needs, shape):
    (in_shape,) = saved
    return (g.reshape(in_shape),)


def transpose(a, axes=None):
    return np.transpose(a, axes), ()


def transpose_vjp(g, saved, needs, axes=None):
    return (np.transpose(g, None if axes is None else np.argsort(axes)),)


def getitem(a, index):
    return a[index], (a.shape, a.dtype)


def getitem_vjp(g, saved, needs, index):
    """Scatter back into zeros; ``add.at`` adds up entries picked more than once."""
    shape, dtype = saved
    grad = np.zeros(shape, dtype=dtype)
    np.add.at(grad, index, g)
    return (grad,)


def concatenate(*arrays, axis=0):
    return np.concatenate(arrays, axis=axis), (tuple(a.shape[axis] for a in arrays),)


def concatenate_vjp(g, saved, needs, axis=0):
    (sizes,) = saved
    pieces = np.split(g, np.cumsum(sizes)[:-1], axis=axis)
    return tuple(p if need else None for p, need in zip(pieces, needs))


# --- softmax family ---------------------------------------------------------------------------
def softmax(a, axis=-1):
    shifted = np.exp(a - np.max(a, axis=axis, keepdims=True))  # the same result, no overflow
    out = shifted / _sum(shifted, axis=axis, keepdims=True)
    return out, (out,)


def softmax_vjp(g, saved, needs, axis=-1):
    """s ⊙ (g − ⟨g, s⟩): the Jacobian diag(s) − ssᵀ applied to g, never built."""
    (s,) = saved
    return (s * (g - _sum(g * s, axis=axis, keepdims=True)),)


def masked_softmax(a, mask, axis=-1):
    """Softmax over the entries where ``mask`` is True; the others get exactly 0.

    A row with no True entry at all (everything masked) gets all zeros, not 0/0 = NaN, and so
    does its gradient: a padded query that may attend to nothing contributes nothing.
    """
    kept = np.where(mask, a, -np.inf)
    top = np.max(kept, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0)
    weights = np.where(mask, np.exp(np.where(mask, a, 0) - top), 0).astype(a.dtype, copy=False)
    total = _sum(weights, axis=axis, keepdims=True)
    out = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return out, (out,)


def masked_softmax_vjp(g, saved, needs, mask, axis=-1):
    (s,) = saved  # same formula as softmax: s is 0 where masked, so those entries get 0
    return (s * (g - _sum(g * s, axis=axis, keepdims=True)),)


def log_softmax(a, axis=-1):
    shifted = a - np.max(a, axis=axis, keepdims=True)
    out = shifted - np.log(_sum(np.exp(shifted), axis=axis, keepdims=True))
    return out, (out,)


def log_softmax_vjp(g, saved, needs, axis=-1):
    (out,) = saved
    return (g - np.exp(out) * _sum(g, axis=axis, keepdims=True),)


def cross_entropy_rows(logits, targets):
    """−log softmax(logits)[target] for each row of 2-D logits; targets are integer class ids."""
    logp, _ = log_softmax(logits, axis=-1)
    return -logp[np.arange(len(targets)), targets], (logp,)


def cross_entropy_rows_vjp(g, saved, needs, targets):
    """softmax(logits) − onehot(target), each row scaled by its upstream gradient."""
    (logp,) = saved
    grad = np.exp(logp)
    grad[np.arange(len(targets)), targets] -= 1
    return (grad * g[:, None],)


OPS = {op.name: op for op in [
    Op("add", add, add_vjp),
    Op("sub", sub, sub_vjp),
    Op("mul", mul, mul_vjp),
    Op("div", div, div_vjp),
    Op("pow", power, power_vjp),
    Op("neg", neg, neg_vjp),
    Op("matmul", matmul, matmul_vjp, _matmul_flops),
    Op("exp", exp, exp_vjp),
    Op("log", log, log_vjp),
    Op("tanh", tanh, tanh_vjp),
    Op("relu", relu, relu_vjp),
    Op("sigmoid", sigmoid, sigmoid_vjp),
    Op("sum", sum_, sum_vjp, _reduction),
    Op("mean", mean, mean_vjp, _reduction),
    Op("max", max_, max_vjp, _reduction),
    Op("reshape", reshape, reshape_vjp, _free),
    Op("transpose", transpose, transpose_vjp, _free),
    Op("getitem", getitem, getitem_vjp, _free),
    Op("concatenate", concatenate, concatenate_vjp, _free),
    Op("softmax", softmax, softmax_vjp),
    Op("masked_softmax", masked_softmax, masked_softmax_vjp),
    Op("log_softmax", log_softmax, log_softmax_vjp),
    Op("cross_entropy_rows", cross_entropy_rows, cross_entropy_rows_vjp, _reduction),
]}
