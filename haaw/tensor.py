"""``Tensor``: a NumPy array that remembers how it was computed (notebooks 03 to 10).

It is a node of the same graph as ``Value`` and runs the same backward algorithm
(``haaw.autograd``). Each operation comes from the table in ``haaw.ops``: the forward result
plus what the backward will need (``saved``), and the vector-Jacobian product that turns
dL/d(output) into dL/d(input) for exactly the inputs that require a gradient.
"""
from __future__ import annotations

from contextlib import contextmanager
from numbers import Number

import numpy as np

from . import autograd, flops, memory
from .ops import OPS

_grad_enabled = True
_detect_anomaly = False


@contextmanager
def no_grad():
    """Run operations without recording them: no graph, nothing saved, no gradient."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


@contextmanager
def detect_anomaly():
    """Stop at the first operation whose forward or backward produces nan or inf, and name it."""
    global _detect_anomaly
    previous, _detect_anomaly = _detect_anomaly, True
    try:
        yield
    finally:
        _detect_anomaly = previous


def _non_finite(array) -> bool:
    array = np.asarray(array)
    return array.dtype.kind in "fcV" and not np.all(np.isfinite(array.astype(np.float64, copy=False)))


def _shape_error(op: str, inputs) -> str | None:
    """A learner-readable reason why ``op`` cannot combine these inputs, or None."""
    shapes = [t.data.shape for t in inputs]
    if op == "matmul":
        a, b = shapes
        if len(a) < 2 or len(b) < 2:
            return (f"matmul: {a} @ {b}: both sides need at least 2 dimensions; "
                    "reshape a vector to (1, n) or (n, 1)")
        if a[-1] != b[-2]:
            return f"matmul: {a} @ {b}: inner dimensions {a[-1]} and {b[-2]} differ"
        try:
            np.broadcast_shapes(a[:-2], b[:-2])
        except ValueError:
            return f"matmul: {a} @ {b}: batch dimensions {a[:-2]} and {b[:-2]} do not broadcast"
    elif op in ("add", "sub", "mul", "div"):
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            return (f"{op}: shapes {shapes[0]} and {shapes[1]} cannot be broadcast together "
                    "(matching trailing dimensions must be equal, or one of them 1)")
    return None


def apply(name, *inputs: "Tensor", **params) -> "Tensor":
    """Run an operation forward and, if any input requires a gradient, record it.

    ``name`` is a name from the table in ``haaw.ops``, or an ``Op`` itself (a custom operation).
    """
    op = OPS[name] if isinstance(name, str) else name
    name = op.name
    if name == "matmul" and min(t.data.ndim for t in inputs) < 2:  # numpy would accept vectors
        raise ValueError(_shape_error(name, inputs))
    try:
        out, saved = op.forward(*(t.data for t in inputs), **params)
    except ValueError:  # explain the shapes in the course's words, not NumPy's
        problem = _shape_error(name, inputs)
        if problem:
            raise ValueError(problem) from None
        raise
    if _detect_anomaly and _non_finite(out) and not any(_non_finite(t.data) for t in inputs):
        raise FloatingPointError(f"anomaly: the forward of '{name}' produced nan or inf from finite inputs "
                                 f"(input shapes {[t.shape for t in inputs]})")
    needs = tuple(t.requires_grad for t in inputs)
    result = Tensor(out)
    if flops._active:
        forward_flops, _ = op.flops([t.data for t in inputs], result.data, needs)
        flops.record("forward", name, forward_flops)
    if _grad_enabled and any(needs):
        record(result, op, inputs, saved, needs, params)
    return result


def record(result: "Tensor", op, inputs, saved, needs, params) -> None:
    """Make ``result`` a node of the graph: its parents, its operation, what backward will need."""
    result.requires_grad = True
    result._parents = tuple(inputs)
    result._op = op.name
    # versions of the tensors whose arrays were saved (-1: the result itself), to catch in-place edits
    saved_ids = {id(a) for a in saved}
    versions = tuple((i, t._version) for i, t in enumerate(inputs) if id(t.data) in saved_ids)
    if id(result.data) in saved_ids:
        versions += ((-1, result._version),)
    result._ctx = (op, saved, needs, params, versions)
    if memory._active:
        leaves = frozenset(id(t.data) for t in inputs if not t._parents)  # parameters, data
        for tracker in memory._active:
            tracker.saved(result, op.name, saved, leaves)


def _is_float(dtype) -> bool:
    """float16/32/64, or one of ml_dtypes' formats (bfloat16, float8...), which NumPy sees as 'V'."""
    return dtype.kind == "f" or dtype.name in _ML_FLOATS


_ML_FLOATS = {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e4m3fnuz", "float8_e5m2fnuz"}


def _lift(x, like: "Tensor") -> "Tensor":
    """Wrap a plain number (in ``like``'s dtype, so float32 stays float32) or an array."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, Number) and not isinstance(x, bool):
        return Tensor(np.asarray(x, dtype=like.data.dtype))
    if isinstance(x, np.ndarray):
        return Tensor(x)
    raise TypeError(f"cannot combine a Tensor with {type(x).__name__} {x!r:.40}")


class Tensor:
    """An n-dimensional array in a computation graph; ``.grad`` has the same shape."""

    __slots__ = ("data", "grad", "requires_grad", "label", "_parents", "_op", "_ctx", "_version")

    def __init__(self, data, requires_grad: bool = False, label: str = ""):
        if isinstance(data, Tensor):
            data = data.data
        try:
            array = np.asarray(data)
        except (TypeError, ValueError) as err:
            raise TypeError(f"Tensor needs numbers in a regular shape; got {type(data).__name__}: {err}") from None
        if array.dtype.kind not in "biuf" and not _is_float(array.dtype):
            raise TypeError(f"Tensor holds numbers; got an array of dtype {array.dtype}")
        if requires_grad and not _is_float(array.dtype):
            raise TypeError(f"only floating-point tensors can require gradients; this one is {array.dtype} "
                            "(create it with float values, e.g. Tensor(x, dtype...) via x.astype(float))")
        self.data = array
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.label = label
        self._parents = ()
        self._op = ""
        self._ctx = None
        self._version = 0  # bumped by every in-place change, so backward can tell saved values changed

    # --- the protocol of the shared backward algorithm ----------------------------------------
    def _vjp(self, upstream):
        op, saved, needs, params, versions = self._ctx
        for index, version in versions:
            tensor = self if index == -1 else self._parents[index]
            if tensor._version != version:
                which = "its output" if index == -1 else f"input {index} (shape {tensor.shape})"
                raise RuntimeError(
                    f"backward of '{self._op}' needs {which} as it was in the forward pass, but it was "
                    f"modified in place afterwards (version {tensor._version}, saved at version {version}). "
                    f"Use an out-of-place operation (y = x + 1, not x += 1), or copy the tensor first.")
        if flops._active:
            _, backward_flops = op.flops([p.data for p in self._parents], self.data, needs)
            flops.record("backward", self._op, backward_flops)
        grads = op.vjp(upstream, saved, needs, **params)
        if _detect_anomaly and not _non_finite(upstream) and any(g is not None and _non_finite(g) for g in grads):
            raise FloatingPointError(f"anomaly: the backward of '{self._op}' produced nan or inf "
                                     f"from a finite upstream gradient")
        for tracker in memory._active:
            tracker.released(self, self._op)
        return grads

    def _reset_grad(self):
        self.grad = None

    def _add_grad(self, g):
        g = np.asarray(g)
        if g.shape != self.data.shape:
            raise RuntimeError(f"internal error: a gradient of shape {g.shape} reached a tensor of "
                               f"shape {self.data.shape} (made by {self._op or 'the user'})")
        if g.dtype != self.data.dtype:
            g = g.astype(self.data.dtype)
        if self.grad is None:
            # adopt the array without copying (views of read-only broadcasts excepted); gradients
            # are never updated in place afterwards, so an array seen elsewhere stays correct
            self.grad = g if g.flags.writeable else g.copy()
        else:
            self.grad = self.grad + g

    def backward(self, grad=None) -> None:
        """Fill ``.grad`` of every tensor this one depends on with dL/d(tensor), L being this one.

        A scalar starts from dL/dL = 1. A non-scalar needs ``grad``: dL/d(this tensor), of its shape.
        Leaf gradients accumulate over calls; reset them with ``zero_grad()``.
        """
        if not self.requires_grad:
            raise RuntimeError("backward(): this tensor does not require a gradient: none of the tensors "
                               "it was computed from has requires_grad=True (or it was made under no_grad)")
        if grad is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"backward() on a tensor of shape {self.data.shape} needs a gradient: pass grad=, an "
                    "array of the same shape holding dL/d(this tensor), or reduce it to a scalar first "
                    "(e.g. loss = y.sum())")
            grad = np.ones_like(self.data)
        else:
            grad = np.array(grad.data if isinstance(grad, Tensor) else grad, dtype=self.data.dtype)  # a copy
            if grad.shape != self.data.shape:
                raise ValueError(f"backward(grad=...): grad has shape {grad.shape}, "
                                 f"but the tensor has shape {self.data.shape}")
        autograd.backward(self, grad)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (``.grad`` becomes None)."""
        self.grad = None

    def detach(self) -> "Tensor":
        """The same numbers, cut off from the graph: no gradient flows back through it."""
        return Tensor(self.data)

    # --- arithmetic ----------------------------------------------------------------------------
    def __add__(self, other):
        return apply("add", self, _lift(other, self))

    def __radd__(self, other):
        return apply("add", _lift(other, self), self)

    def __sub__(self, other):
        return apply("sub", self, _lift(other, self))

    def __rsub__(self, other):
        return apply("sub", _lift(other, self), self)

    def __mul__(self, other):
        return apply("mul", self, _lift(other, self))

    def __rmul__(self, other):
        return apply("mul", _lift(other, self), self)

    def __truediv__(self, other):
        return apply("div", self, _lift(other, self))

    def __rtruediv__(self, other):
        return apply("div", _lift(other, self), self)

    def __pow__(self, exponent):
        if not isinstance(exponent, Number) or isinstance(exponent, bool):
            raise TypeError(f"Tensor ** exponent: the exponent must be a plain number, got {type(exponent).__name__}")
        return apply("pow", self, exponent=exponent)

    def __neg__(self):
        return apply("neg", self)

    def __matmul__(self, other):
        return apply("matmul", self, _lift(other, self))

    def __rmatmul__(self, other):
        return apply("matmul", _lift(other, self), self)

    # --- in-place changes: allowed where no gradient is being recorded, and versioned -----------
    def _in_place(self, name: str, instead: str, change) -> "Tensor":
        if self.requires_grad and _grad_enabled:
            raise RuntimeError(f"{name}: in-place change of a tensor that requires a gradient; backward may "
                               f"need its old value. Write {instead} instead (or use no_grad() for an update).")
        change(self.data)
        self._version += 1
        return self

    def __iadd__(self, other):
        other = other.data if isinstance(other, Tensor) else other
        return self._in_place("x += ...", "y = x + ...", lambda d: np.add(d, other, out=d, casting="unsafe"))

    def __isub__(self, other):
        other = other.data if isinstance(other, Tensor) else other
        return self._in_place("x -= ...", "y = x - ...", lambda d: np.subtract(d, other, out=d, casting="unsafe"))

    def __imul__(self, other):
        other = other.data if isinstance(other, Tensor) else other
        return self._in_place("x *= ...", "y = x * ...", lambda d: np.multiply(d, other, out=d, casting="unsafe"))

    def __itruediv__(self, other):
        other = other.data if isinstance(other, Tensor) else other
        return self._in_place("x /= ...", "y = x / ...", lambda d: np.divide(d, other, out=d, casting="unsafe"))

    def __setitem__(self, index, value):
        value = value.data if isinstance(value, Tensor) else value
        self._in_place("x[...] = ...", "a new tensor (e.g. concatenate the pieces)",
                       lambda d: d.__setitem__(index, value))

    # --- functions -----------------------------------------------------------------------------
    def exp(self):
        return apply("exp", self)

    def log(self):
        return apply("log", self)

    def tanh(self):
        return apply("tanh", self)

    def relu(self):
        return apply("relu", self)

    def sigmoid(self):
        return apply("sigmoid", self)

    def sum(self, axis=None, keepdims=False):
        return apply("sum", self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return apply("mean", self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return apply("max", self, axis=axis, keepdims=keepdims)

    amax = max  # PyTorch's name for the same thing (its .max(dim) also returns indices)

    def softmax(self, axis=-1):
        return apply("softmax", self, axis=axis)

    def log_softmax(self, axis=-1):
        return apply("log_softmax", self, axis=axis)

    # --- shapes ------------------------------------------------------------------------------
    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        try:
            np.empty(self.data.shape).reshape(shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape {self.data.shape} ({self.data.size} numbers) "
                             f"into {tuple(shape)}") from None
        return apply("reshape", self, shape=tuple(shape))

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return apply("transpose", self, axes=tuple(axes) if axes else None)

    @property
    def T(self):
        return self.transpose()

    def swapaxes(self, axis1: int, axis2: int):
        axes = list(range(self.ndim))
        axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
        return self.transpose(axes)

    def __getitem__(self, index):
        if isinstance(index, Tensor):
            index = index.data
        try:
            self.data[index]
        except IndexError as err:
            raise IndexError(f"indexing a tensor of shape {self.data.shape}: {err}") from None
        return apply("getitem", self, index=index)

    # --- looking at it ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    def __len__(self) -> int:
        return len(self.data)

    def numpy(self) -> np.ndarray:
        return self.data

    def item(self) -> float:
        return self.data.item()

    def __repr__(self) -> str:
        body = np.array2string(self.data, precision=4, separator=", ", threshold=20, prefix="Tensor(")
        extras = "".join([f", dtype={self.data.dtype}" if self.data.dtype != np.float64 else "",
                          ", requires_grad=True" if self.requires_grad else "",
                          f", label={self.label!r}" if self.label else ""])
        return f"Tensor({body}{extras})"


def concatenate(tensors, axis: int = 0) -> Tensor:
    """Join tensors along ``axis``; each gets back its own slice of the gradient."""
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    shapes = [t.shape for t in tensors]
    try:
        np.concatenate([np.empty(s) for s in shapes], axis=axis)
    except (ValueError, np.exceptions.AxisError) as err:
        raise ValueError(f"concatenate along axis {axis}: shapes {shapes} do not fit ({err})") from None
    return apply("concatenate", *tensors, axis=axis)
