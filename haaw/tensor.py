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


@contextmanager
def no_grad():
    """Run operations without recording them: no graph, nothing saved, no gradient."""
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, False
    try:
        yield
    finally:
        _grad_enabled = previous


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


def apply(name: str, *inputs: "Tensor", **params) -> "Tensor":
    """Run operation ``name`` forward and, if any input requires a gradient, record it."""
    op = OPS[name]
    if name == "matmul" and min(t.data.ndim for t in inputs) < 2:  # numpy would accept vectors
        raise ValueError(_shape_error(name, inputs))
    try:
        out, saved = op.forward(*(t.data for t in inputs), **params)
    except ValueError:  # explain the shapes in the course's words, not NumPy's
        problem = _shape_error(name, inputs)
        if problem:
            raise ValueError(problem) from None
        raise
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
    result._ctx = (op, saved, needs, params)
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

    __slots__ = ("data", "grad", "requires_grad", "label", "_parents", "_op", "_ctx")

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

    # --- the protocol of the shared backward algorithm ----------------------------------------
    def _vjp(self, upstream):
        op, saved, needs, params = self._ctx
        if flops._active:
            _, backward_flops = op.flops([p.data for p in self._parents], self.data, needs)
            flops.record("backward", self._op, backward_flops)
        grads = op.vjp(upstream, saved, needs, **params)
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
