"""``Tensor``: a NumPy array that remembers how it was computed (notebooks 03 to 10).

It is a node of the same kind of graph as ``Value`` and runs the same backward algorithm
(``autograd.py``). Each operation comes from the table in ``ops.py``: ``apply`` runs its forward,
and if an input requires a gradient, records a ``Context`` holding what backward will need. At
backward, ``_vjp`` calls the operation's vector-Jacobian products for the inputs that need one.
"""
from __future__ import annotations

import math
from collections import namedtuple
from numbers import Number

import numpy as np

from . import autograd, checks, dtypes, hooks, plugins
from .modes import anomaly_detection, autocast_dtype, grad_enabled
from .ops import OPS, Context

# under autocast these run in its 16-bit format (PyTorch's list is longer: convolutions, bmm, ...); every other
# operation runs in the format of its inputs, as in PyTorch's autocast for operations on neither of its lists
AUTOCAST_TO_LOW = ("matmul", "linear")
_FLOAT_RESULT = ("exp", "log", "tanh", "sigmoid", "softmax", "log_softmax")  # on integers: computed in float64


def apply(op, *inputs: "Tensor", round_to=None, **params) -> "Tensor":
    """Run an operation forward and, if any input requires a gradient, record it for backward.

    ``op`` is a name from the table in ``ops.py``, or an ``Op`` itself (a custom operation). ``round_to``, a
    dtype, is the format the result is rounded to once computed (a 16-bit tensor met a number: ``_number_op``).
    """
    if isinstance(op, str):
        op = OPS[op]
    low = autocast_dtype()
    if low is not None and op.name in AUTOCAST_TO_LOW:  # autocast: cast recorded in the graph, as PyTorch's is
        inputs = tuple(t.to(low) if dtypes.is_float(t.dtype) else t for t in inputs)
    arrays = [t.data for t in inputs]
    if op.name in _FLOAT_RESULT and not dtypes.is_float(arrays[0].dtype):
        arrays[0] = arrays[0].astype(np.float64)  # PyTorch too computes exp or sigmoid of integers in floats
    elif op.name == "mean" and not dtypes.is_float(arrays[0].dtype):
        raise TypeError(f"mean() of a {arrays[0].dtype} tensor: a mean needs floating-point numbers, as in PyTorch. "
                        "Convert first: x.to(np.float64).mean(), or use sum() for a count")
    needs = tuple([t.requires_grad for t in inputs])
    ctx = Context(op, needs)
    chosen = hooks.selective()
    reuse = chosen is not None and op.name in chosen[0]
    try:
        if reuse and chosen[2] == "reuse":  # selective checkpointing: the result the forward pass kept
            op.keep(ctx, *arrays, **params)  # only what backward needs goes on ctx; nothing is computed
            out = chosen[1].pop(0)
        else:
            out = op.forward(ctx, *arrays, **params)
            if reuse:
                chosen[1].append(out)
    except ValueError:  # explain the shapes in the course's words, not NumPy's
        problem = checks.shape_error(op.name, arrays)
        if problem:
            raise ValueError(problem) from None
        raise
    if anomaly_detection() and checks.non_finite(out) and not any(checks.non_finite(a) for a in arrays):
        raise FloatingPointError(f"anomaly: the forward of '{op.name}' produced nan or inf from finite inputs "
                                 f"(input shapes {[a.shape for a in arrays]})")
    out = np.asarray(out)  # NumPy reductions return scalars; a Tensor always holds an array
    if round_to is not None and out.dtype != round_to:
        out = out.astype(round_to)  # past the format's range: inf, and NumPy's overflow warning, as x16 * x16 gives
    result = wrap(out)
    if op.view and np.may_share_memory(out, arrays[0]):
        result._vc = inputs[0]._vc  # a view: an in-place edit of either is an edit of both
    elif OPS.get(op.name) is not op:  # a custom operation (a Function, checkpoint) may return its input or a view
        for t, a in zip(inputs, arrays):
            if np.may_share_memory(out, a):
                result._vc = t._vc
                break
    recorded = grad_enabled() and (True in needs or op.always_record)
    if recorded:
        result.requires_grad = True
        result._parents = inputs
        result._ctx = ctx
        ctx.slots = plugins.snapshot()  # your functions in use now are the ones its backward calls
        ctx.versions = [(t._vc, t._vc[0]) for t in inputs]
        ctx.versions.append((result._vc, result._vc[0]))
    pair = hooks.saved_pair() if recorded else None
    if pair is not None:  # saved_tensors_hooks: every saved array through pack, now; through unpack, in backward
        for name, value in list(vars(ctx).items()):
            if isinstance(value, np.ndarray):
                setattr(ctx, name, hooks.Packed(pair[0](value), pair[1]))
            elif isinstance(value, tuple) and any(isinstance(v, np.ndarray) for v in value):
                setattr(ctx, name, tuple(hooks.Packed(pair[0](v), pair[1]) if isinstance(v, np.ndarray) else v
                                         for v in value))
    if reuse and chosen[2] == "reuse":
        with hooks.marked_reused():
            for hook in hooks.on_forward():
                hook(op, ctx if recorded else None, inputs, result)
    else:
        for hook in hooks.on_forward():
            hook(op, ctx if recorded else None, inputs, result)
    return result


def _lift(x, like: "Tensor") -> "Tensor":
    """The other operand of ``like`` as a Tensor, with PyTorch's rule for plain numbers.

    A Python or NumPy scalar takes ``like``'s dtype when it is of the same kind (2.0 * a float32
    tensor stays float32), and is never cut down to it: a float with an integer tensor gives
    float64 (``Tensor([1, 2]) * 0.5`` is ``[0.5, 1.0]``, not ``[0, 0]``). With a 16- or 8-bit float
    tensor it is kept in float32, unrounded: 1e5 is inf in float16 (``_number_op`` rounds the result).
    """
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (Number, np.generic)) and not isinstance(x, (bool, np.bool_, complex, np.complexfloating)):
        if isinstance(x, (float, np.floating)) and not dtypes.is_float(like.dtype):
            return wrap(np.asarray(x, dtype=np.float64))
        if like.dtype == np.bool_:  # True + 1 is 2, as in PyTorch and NumPy
            return wrap(np.asarray(x, dtype=np.int64))
        if like.dtype.kind in "iu":  # int8 * 1000: 1000 wraps round to int8's -24, as PyTorch computes it in int8
            return wrap(np.asarray(x).astype(like.dtype))  # (up to 2**64, as PyTorch; past it both refuse)
        if _narrow_float(like.dtype):
            return wrap(np.asarray(x, dtype=np.float32))
        return wrap(np.asarray(x, dtype=like.dtype))
    if isinstance(x, np.ndarray):
        return Tensor(x)
    if isinstance(x, tuple(_RESULTS.values())):
        raise TypeError(f"cannot combine a Tensor with the (values, indices) that x.{type(x).__name__}(dim) returns, "
                        f"as PyTorch's does: take its .values (x.{type(x).__name__}(dim, keepdim=True).values)")
    raise TypeError(f"cannot combine a Tensor with {type(x).__name__} {x!r:.40}")


def _narrow_float(dtype) -> bool:
    """float16, bfloat16 and the 8-bit floats: formats that compute in float32 and round the result."""
    return dtype.itemsize < 4 and dtypes.is_float(dtype)


def _number_op(name: str, a, b) -> "Tensor":
    """``a <op> b``, one of them a Tensor, the other perhaps a number. A number with a 16- or 8-bit tensor is
    used unrounded, in float32, and the result is rounded once to the tensor's format, as PyTorch computes it:
    ``x16 * 1e5`` is 100.06 for x = 1e-3, not inf (1e5 rounded to float16 first). The gradient is computed in
    float32 too, and rounded once to the tensor's format when it reaches it."""
    t = a if isinstance(a, Tensor) else b
    number = b if a is t else a
    if isinstance(number, tuple(_RESULTS.values())):
        _lift(number, t)  # refused, with what to write
    if name == "sub" and np.bool_ in (np.asarray(getattr(a, "data", a)).dtype, np.asarray(getattr(b, "data", b)).dtype):
        raise RuntimeError("subtraction with a bool tensor: PyTorch refuses it too. "
                           "Convert it to numbers first: mask.to(np.int64) - 1")
    wide = _narrow_float(t.dtype) and isinstance(number, (Number, np.generic))
    return apply(name, _lift(a, t), _lift(b, t), round_to=t.dtype if wide else None)


def wrap(array: np.ndarray) -> "Tensor":
    """A new Tensor around ``array`` (no copy, no checks): how operations return their results."""
    t = Tensor.__new__(Tensor)
    t.data, t.grad, t.requires_grad, t.label = array, None, False, ""
    t._parents, t._ctx, t._vc, t._hooks = (), None, [0], ()
    return t


_UFUNCS = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "divide": "__truediv__",
           "true_divide": "__truediv__",
           "matmul": "__matmul__", "power": "__pow__", "negative": "__neg__", "exp": "exp", "log": "log", "tanh": "tanh",
           "equal": "__eq__", "not_equal": "__ne__", "less": "__lt__", "less_equal": "__le__",
           "greater": "__gt__", "greater_equal": "__ge__"}
_MIRRORED = {"__eq__": "__eq__", "__ne__": "__ne__", "__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__",
             "__ge__": "__le__"}  # n < x is x > n


class Tensor:
    """An n-dimensional array in a computation graph; ``.grad`` has the same shape.

    ``Tensor(data)`` copies ``data``, as ``torch.tensor`` does (``from_numpy`` shares it instead).
    """

    __slots__ = ("data", "grad", "requires_grad", "label", "_parents", "_ctx", "_vc", "_hooks")

    def __init__(self, data, requires_grad: bool = False, dtype=None, label: str = ""):
        if isinstance(data, Tensor):
            data = data.data
        if type(dtype) is str:
            dtype = dtypes.as_dtype(dtype, "Tensor(dtype=...)")  # "bfloat16" before anything imported ml_dtypes
        try:
            array = np.array(data, dtype=dtype)
        except (TypeError, ValueError) as err:
            # a tensor NumPy cannot read (one that requires grad) or of its own shape: [[a, 2.]], [Tensor([1.]), 2.]
            if isinstance(data, (list, tuple)) and _holds_tensor(data):
                array = np.array(_entries(data), dtype=dtype)
            else:
                raise TypeError(f"Tensor needs numbers in a regular shape; got {type(data).__name__}: {err}") from None
        else:  # [[Tensor([1.])], [Tensor([2.])]]: NumPy gives each tensor its axes, torch reads it as one number;
            # the whole list is walked only when NumPy found more axes than the lists give
            if isinstance(data, (list, tuple)) and array.ndim > _list_depth(data) and _holds_tensor(data):
                array = np.array(_entries(data), dtype=dtype)
        problem = checks.number_format_error(array.dtype)
        if problem:
            raise TypeError(problem)
        if requires_grad and not dtypes.is_float(array.dtype):
            raise TypeError(f"only floating-point tensors can require gradients; this one is {array.dtype} "
                            "(make it from floats, or pass dtype=np.float64)")
        self.data = array
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self.label = label
        self._parents = ()
        self._ctx = None
        self._vc = [0]  # version counter, shared with views: bumped by every in-place change
        self._hooks = ()  # what register_hook added, in order: each a RemovableHandle

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def _op(self) -> str:
        return self._ctx.op.name if self._ctx is not None else ""

    # --- the protocol of the shared backward algorithm ----------------------------------------
    def _vjp(self, upstream):
        ctx = self._ctx
        for counter, version in ctx.versions:
            if counter[0] != version:
                checks.versions_unchanged(self)
                break
        op = ctx.op
        for name, value in list(vars(ctx).items()):  # arrays saved through saved_tensors_hooks: unpacked now
            if isinstance(value, hooks.Packed):
                setattr(ctx, name, value.unpack(value.packed))
            elif isinstance(value, tuple) and any(isinstance(v, hooks.Packed) for v in value):
                setattr(ctx, name, tuple(v.unpack(v.packed) if isinstance(v, hooks.Packed) else v for v in value))
        with plugins.as_at(ctx.slots):  # the slots as the forward pass found them, unbroadcast's too
            yours = plugins.override(op.slot) if op.slot else None  # your backward for it (haaw.use), if in use
            if yours:
                grads = _all_grads(op, ctx, upstream, yours)
            elif op.vjp_all is None:
                grads = [vjp(ctx, upstream) if need else None for vjp, need in zip(op.vjps, ctx.needs_input_grad)]
            else:
                grads = _all_grads(op, ctx, upstream)
        for i, (parent, g) in enumerate(zip(self._parents, grads)):  # by position: == between tensors is elementwise
            if g is not None and g.shape != parent.data.shape:
                checks.wrong_shape(op, i, g, parent)
        if anomaly_detection() and not checks.non_finite(upstream) and any(g is not None and checks.non_finite(g) for g in grads):
            raise FloatingPointError(f"anomaly: the backward of '{op.name}' produced nan or inf "
                                     f"from a finite upstream gradient")
        for hook in hooks.on_backward():
            hook(self)
        # a leaf keeps an array of its own: upstream itself (x + y passes it on to both) or a view of it would
        # make x.grad the very array of another tensor's .grad
        return [g.copy() if g is not None and not parent._parents and (g is upstream or g.base is not None) else g
                for parent, g in zip(self._parents, grads)]

    def _reset_grad(self):
        self.grad = None

    def _add_grad(self, g):
        if not self.requires_grad:  # a leaf switched off with requires_grad_(False) after the forward pass
            return
        if g.dtype != self.data.dtype:
            g = g.astype(self.data.dtype)
        if self.grad is None:
            # adopt the array without copying (read-only broadcasts excepted); gradients are never
            # updated in place afterwards, so an array seen elsewhere stays correct
            self.grad = g if g.flags.writeable else g.copy()
        else:
            self.grad = self.grad + g

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        """Fill ``.grad`` of every tensor this one depends on with dL/d(tensor), L being this one.

        A scalar starts from dL/dL = 1. A non-scalar needs ``gradient``: dL/d(this tensor), of its
        shape. Leaf gradients accumulate over calls; reset them with ``zero_grad()``.
        """
        if create_graph:
            raise NotImplementedError("backward(create_graph=True): haaw does not record the backward pass, so it "
                                      "has no gradients of gradients (PyTorch does)")
        # retain_graph is accepted and changes nothing: haaw keeps what backward needs until the graph is dropped,
        # so a graph can always be run backward again (PyTorch frees it unless retain_graph=True)
        if not self.requires_grad:
            raise RuntimeError("backward(): this tensor does not require a gradient: none of the tensors "
                               "it was computed from has requires_grad=True (or it was made under no_grad)")
        if gradient is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"backward() on a tensor of shape {self.data.shape} needs a gradient: pass gradient=, an "
                    "array of the same shape holding dL/d(this tensor), or reduce it to a scalar first "
                    "(e.g. loss = y.sum())")
            gradient = np.ones_like(self.data)
        else:
            gradient = np.array(gradient.data if isinstance(gradient, Tensor) else gradient,
                                dtype=self.data.dtype)  # a copy
            if gradient.shape != self.data.shape:
                raise ValueError(f"backward(gradient=...): it has shape {gradient.shape}, "
                                 f"but the tensor has shape {self.data.shape}")
        autograd.backward(self, gradient)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient (``.grad`` becomes None)."""
        self.grad = None

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Start (or stop) recording operations on this leaf tensor; returns it."""
        if self._parents and not requires_grad:
            raise RuntimeError("requires_grad_(False) on a tensor computed from others: its gradient flows back "
                               "whatever its flag says. Use x.detach() for the same numbers without the graph "
                               "(PyTorch refuses this too)")
        if requires_grad and not dtypes.is_float(self.dtype):
            raise TypeError(f"only floating-point tensors can require gradients; this one is {self.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    def register_hook(self, hook) -> "RemovableHandle":
        """Call ``hook(grad)`` each time backward has this tensor's whole gradient of the pass, before it is used:
        a leaf's before it is added to ``.grad``, an intermediate's before it flows on to its parents. ``grad`` is
        a read-only NumPy array (haaw's gradients are arrays); a hook that returns an array (or a Tensor) of the
        same shape replaces the gradient, one that returns None leaves it. Hooks run in the order they were
        registered, each on what the one before returned, as PyTorch's ``Tensor.register_hook``. A tensor the pass
        reaches but sends no gradient (a Function's backward returned None for it) has its hooks called with None,
        and they must return None, as in PyTorch. Returns a handle: ``handle.remove()`` unregisters the hook."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient (as PyTorch "
                               "says): no gradient will ever reach it. Make the leaf with requires_grad=True, "
                               "or register the hook on a tensor computed from one")
        if not callable(hook):
            raise TypeError(f"register_hook: expected a function of the gradient, got {type(hook).__name__}")
        handle = RemovableHandle(self, hook)
        self._hooks = (*self._hooks, handle)
        return handle

    def _run_hooks(self, grad: np.ndarray | None) -> np.ndarray | None:
        """``grad`` after every hook registered on this tensor, in order (autograd.backward calls this). ``grad``
        None: the pass reached this tensor but sent it no gradient (a Function's backward returned None for it, or
        for a tensor computed from it); each hook is called with None, as PyTorch's are, and must return None."""
        if grad is None:
            for handle in self._hooks:
                if handle.hook(None) is not None:
                    raise RuntimeError(f"the hook {getattr(handle.hook, '__name__', handle.hook)!s:.40} returned a "
                                       "gradient where it was given None: no gradient reached this tensor (a "
                                       "Function's backward returned None for it), and a hook cannot make one up. "
                                       "Return None when given None: `lambda g: None if g is None else ...` "
                                       "(PyTorch refuses too: \"can't replace a None gradient with a non-None value\")")
            return None
        for handle in self._hooks:
            seen = np.asarray(grad).view()
            seen.flags.writeable = False  # the array may be another tensor's .grad too: replace it, never edit it
            new = handle.hook(seen)
            if new is None:
                continue
            new = np.asarray(new.data if isinstance(new, Tensor) else new)
            if new.shape != grad.shape:
                raise RuntimeError(f"the hook {getattr(handle.hook, '__name__', handle.hook)!s:.40} returned a "
                                   f"gradient of shape {new.shape} for a tensor of shape {grad.shape}: return one "
                                   "of the same shape, or None to leave the gradient as it is (PyTorch refuses "
                                   "this too)")
            # an array of the tensor's own format and its own memory: a hook may hand back the read-only one it saw
            grad = new if new.dtype == self.data.dtype and new.flags.writeable else new.astype(self.data.dtype)
        return grad

    def detach(self) -> "Tensor":
        """The same numbers (the same memory), cut off from the graph: no gradient flows back through it."""
        t = wrap(self.data)
        t._vc = self._vc  # an in-place edit of the detached tensor is an edit of this one
        return t

    def detach_(self) -> "Tensor":
        """Cut this tensor off from the graph in place (it becomes a leaf that does not require grad), as
        PyTorch's ``detach_``; returns it."""
        self._parents, self._ctx, self.requires_grad = (), None, False
        return self

    def __getattr__(self, name: str):
        """Called only for a name a Tensor does not have: a PyTorch name haaw leaves out gets what to write instead."""
        instead = _PYTORCH_ONLY.get(name)
        if instead is None:
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        raise AttributeError(f"Tensor.{name}: PyTorch's tensors have it, haaw's do not. {instead}")

    # --- arithmetic ----------------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """``ndarray + tensor``, ``np.float64(2) * tensor``, ``np.exp(tensor)``: done by the Tensor, recorded."""
        name = _UFUNCS.get(ufunc.__name__)
        if method != "__call__" or kwargs or name is None:
            raise TypeError(f"np.{ufunc.__name__} cannot record a Tensor in the graph. Use the Tensor's own "
                            f"operations, or pass t.detach().numpy() for a plain array.")
        first, *rest = inputs
        if not isinstance(first, Tensor):  # NumPy on the left: the Tensor's reflected operation
            return getattr(self, _MIRRORED.get(name) or "__r" + name[2:])(first)
        return getattr(first, name)(*rest)

    def __add__(self, other):
        return _number_op("add", self, other)

    def __radd__(self, other):
        return _number_op("add", other, self)

    def __sub__(self, other):
        return _number_op("sub", self, other)

    def __rsub__(self, other):
        return _number_op("sub", other, self)

    def __mul__(self, other):
        return _number_op("mul", self, other)

    def __rmul__(self, other):
        return _number_op("mul", other, self)

    def __truediv__(self, other):
        return _number_op("div", self, other)

    def __rtruediv__(self, other):
        return _number_op("div", other, self)

    def __pow__(self, exponent):
        if not isinstance(exponent, (Number, np.generic)) or isinstance(exponent, (bool, complex)):
            raise TypeError(f"Tensor ** exponent: the exponent must be a plain number, got {type(exponent).__name__}")
        if isinstance(exponent, np.generic):  # f32 ** np.float64(2) stays float32, as a number does in PyTorch
            exponent = exponent.item()
        if isinstance(exponent, (float, np.floating)) and not dtypes.is_float(self.dtype):
            return (self * 1.0) ** exponent  # an integer tensor to a fractional power: in floats, like PyTorch
        return apply("pow", self, exponent=exponent)

    def __rpow__(self, base):
        """``base ** x`` for a positive number ``base``: exp(x · ln base), so the gradient is base^x · ln base."""
        if not isinstance(base, (Number, np.generic)) or isinstance(base, (bool, complex)) or not base > 0:
            raise TypeError(f"number ** Tensor: haaw takes a positive number as the base, got {base!r}")
        if not dtypes.is_float(self.dtype):  # integers: no gradient, the exact powers
            if isinstance(base, (int, np.integer)):  # 2 ** -1 is 0 in integers, as PyTorch truncates it (1 ** -1 is 1)
                powers = np.power(base, np.maximum(self.data, 0))
                return wrap(np.where(self.data < 0, powers.dtype.type(base == 1), powers))
            return wrap(np.power(base, self.data))
        if _narrow_float(self.dtype):  # in float32, rounded once: bfloat16's own exp(10 · ln 2) is 1000, not 1024
            return (self.to(np.float32) * math.log(base)).exp().to(self.dtype)
        return (self * math.log(base)).exp()

    def __neg__(self):
        return apply("neg", self)

    def __matmul__(self, other):
        return _matmul(self, _lift(other, self))

    def __rmatmul__(self, other):
        return _matmul(_lift(other, self), self)

    # --- in-place changes: allowed where no gradient is being recorded, and versioned -----------
    def _in_place(self, name: str, instead: str, value, change) -> "Tensor":
        """``change(self.data, value's array)``, if no gradient can be lost by it; bumps the version."""
        if self.requires_grad and grad_enabled():
            raise RuntimeError(f"{name}: in-place change of a tensor that requires a gradient; backward may "
                               f"need its old value. Write {instead} instead (or use no_grad() for an update).")
        if isinstance(value, Tensor) and value.requires_grad and grad_enabled():
            # PyTorch records such a write; haaw records no in-place operation, so the gradient would be lost
            raise RuntimeError(f"{name}: the value written requires a gradient, and haaw does not record in-place "
                               f"writes, so its gradient would be lost. Write {instead} instead (or write "
                               "value.detach() if no gradient should flow).")
        _castable(name, instead, self.dtype, value)
        if isinstance(value, (float, np.floating, int, np.integer)) and dtypes.is_float(self.dtype):
            # x16 *= 1e5: computed in float32 and rounded once, as x16 * 1e5 is; x32 += np.float64(v): v rounded to
            # float32 first, as x32 + v and PyTorch's x32 += v compute it (NumPy would add in float64, then round)
            value = np.float32(value) if _narrow_float(self.dtype) else self.dtype.type(value)
        change(self.data, value.data if isinstance(value, Tensor) else value)
        self._vc[0] += 1
        return self

    def __iadd__(self, other):  # (x[...] = value: NumPy's assignment casts, as PyTorch's does)
        return self._in_place("x += ...", "y = x + ...", other, lambda d, v: np.add(d, v, out=d, casting="unsafe"))

    def __isub__(self, other):
        return self._in_place("x -= ...", "y = x - ...", other, lambda d, v: np.subtract(d, v, out=d, casting="unsafe"))

    def __imul__(self, other):
        return self._in_place("x *= ...", "y = x * ...", other, lambda d, v: np.multiply(d, v, out=d, casting="unsafe"))

    def __itruediv__(self, other):
        return self._in_place("x /= ...", "y = x / ...", other, lambda d, v: np.divide(d, v, out=d, casting="unsafe"))

    def __setitem__(self, index, value):
        self._in_place("x[...] = ...", "a new tensor (e.g. cat the pieces)", value,
                       lambda d, v: d.__setitem__(index, v))

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

    def clamp(self, min=None, max=None):
        """Every entry moved into [min, max] (either bound may be left out), as PyTorch's ``clamp``."""
        if min is None and max is None:
            raise ValueError("clamp: give min, max or both (as PyTorch asks)")
        if isinstance(min, (Tensor, np.ndarray)) or isinstance(max, (Tensor, np.ndarray)):
            raise TypeError("clamp: haaw's bounds are numbers; PyTorch also takes a tensor of bounds, entry by entry. "
                            "For those write haaw.where(x < low, low, x) (and haaw.where(x > high, high, x))")
        return apply("clamp", self, min=min, max=max)

    def sum(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None, out=None):
        """The sum over ``dim`` (all axes if None). ``dtype=``: computed in that format, as PyTorch's: the same as
        ``x.to(dtype).sum(...)``."""
        checks.numpy_extras("sum", out, takes_dtype=True)
        if dtype is not None:
            return self.to(dtype).sum(dim, keepdim, axis=axis, keepdims=keepdims)
        return apply("sum", self, dim=checks.dims(self, dim, axis, "sum"), keepdim=checks.keep(keepdim, keepdims))

    def mean(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None, out=None):
        """The mean over ``dim`` (all axes if None); ``dtype=`` as for ``sum``."""
        checks.numpy_extras("mean", out, takes_dtype=True)
        if dtype is not None:
            return self.to(dtype).mean(dim, keepdim, axis=axis, keepdims=keepdims)
        return apply("mean", self, dim=checks.dims(self, dim, axis, "mean"), keepdim=checks.keep(keepdim, keepdims))

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None, out=None):
        """Without ``dim``: the largest entry, one tensor (entries that tie share its gradient). With ``dim``, as
        PyTorch's: the named tuple ``(values, indices)`` of each slice's largest entry and where it is (int64, the
        first on ties; a nan counts as the largest), and the gradient goes to that one entry:
        ``values, indices = x.max(dim=1)``."""
        return self._extreme("max", np.argmax, dim, keepdim, axis, keepdims, dtype, out)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None, out=None):
        """The smallest entry, or with ``dim`` the named tuple ``(values, indices)``, as ``max``."""
        return self._extreme("min", np.argmin, dim, keepdim, axis, keepdims, dtype, out)

    def amax(self, dim=(), keepdim=False):
        """The largest entries over ``dim`` (an axis, a tuple of them, or every axis by default), values only, as
        PyTorch's ``amax``: entries that tie share the gradient evenly."""
        return self._extremes("max", dim, keepdim)

    def amin(self, dim=(), keepdim=False):
        """The smallest entries over ``dim``, as ``amax``."""
        return self._extremes("min", dim, keepdim)

    def _extremes(self, what, dim, keepdim):
        dims = checks.dims(self, dim, None, "a" + what)
        if self.data.size == 0:
            checks.empty_reduction(self, dims, "a" + what)
        return apply(what, self, dim=dims, keepdim=keepdim)

    def _extreme(self, what, find, dim, keepdim, axis, keepdims, dtype, out):
        checks.numpy_extras(what, out, dtype=dtype)
        if isinstance(dim, Tensor):
            raise TypeError(f"{what}: haaw takes no tensor as the second operand (PyTorch's x.{what}(y), entry by "
                            f"entry). Write haaw.where(x {'>' if what == 'max' else '<'} y, x, y)")
        keepdim = checks.keep(keepdim, keepdims)
        if dim is None and axis is None:
            if self.data.size == 0:
                checks.empty_reduction(self, None, what)
            return apply(what, self, keepdim=keepdim)
        if isinstance(dim if axis is None else axis, (tuple, list)):
            raise TypeError(f"{what}: dim must be one integer, as in PyTorch (x.{what}(dim) also returns where each "
                            f"{'largest' if what == 'max' else 'smallest'} entry is, along that one axis); got "
                            f"{dim if axis is None else axis!r}. For the values over several axes write "
                            f"x.a{what}({dim if axis is None else axis!r}), as in PyTorch")
        dims = checks.dims(self, dim, axis, what)
        if self.data.size == 0:
            checks.empty_reduction(self, dims, what)
        if dims is None:  # a 0-d tensor: its one entry, at index 0
            return _RESULTS[what](apply(what, self), wrap(np.zeros((), dtype=np.int64)))
        index = find(self.data, axis=dims[0], keepdims=True).astype(np.int64)
        values = apply(what, self, dim=dims, keepdim=keepdim, index=index)
        return _RESULTS[what](values, wrap(index if keepdim else index.squeeze(dims[0])))

    def argmax(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Where the largest entry is (the first, on ties): over everything (an index into the flattened tensor)
        or along ``dim``; int64, outside the graph, as in PyTorch."""
        return self._arg(np.argmax, dim, keepdim, "argmax")

    def argmin(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Where the smallest entry is, as ``argmax``."""
        return self._arg(np.argmin, dim, keepdim, "argmin")

    def _arg(self, find, dim, keepdim, what):
        if self.data.size == 0:
            raise RuntimeError(f"{what}() of an empty tensor (shape {self.shape}): there is no entry to point to. "
                               "PyTorch refuses it too")
        if dim is None:
            out = np.asarray(find(self.data))
            return wrap((out.reshape((1,) * self.ndim) if keepdim else out).astype(np.int64))
        dims = checks.dims(self, dim, None, what)
        if dims is None:  # a 0-d tensor: its one entry is at 0
            return wrap(np.zeros((), dtype=np.int64))
        return wrap(find(self.data, axis=dims[0], keepdims=keepdim).astype(np.int64))

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The variance: the mean squared distance from the mean, dividing by N − correction (1 by default,
        as PyTorch's: the unbiased estimate from a sample; correction=0 is NumPy's default). The arguments are in
        PyTorch's order: ``x.var(0, False)`` is the biased variance over axis 0 (``unbiased=False`` is
        ``correction=0``), ``x.var(False)`` over every axis, and ``keepdim`` comes third."""
        correction = checks.correction(dim, unbiased, correction, "var")
        if isinstance(dim, (bool, np.bool_)):  # x.var(False): PyTorch's var(unbiased)
            dim = None
        dims = checks.dims(self, dim, None, "var")
        count = math.prod(n for i, n in enumerate(self.shape) if dims is None or i in dims)
        centred = self - self.mean(dim=dims, keepdim=True)
        return (centred * centred).sum(dim=dims, keepdim=keepdim) / max(count - correction, 0)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """The standard deviation: the square root of ``var`` (the same arguments, in PyTorch's order)."""
        correction = checks.correction(dim, unbiased, correction, "std")
        return self.var(None if isinstance(dim, (bool, np.bool_)) else dim, keepdim=keepdim,
                        correction=correction) ** 0.5

    def softmax(self, dim=-1, *, axis=None):
        return apply("softmax", self, dim=checks.one_dim(self, dim, axis, "softmax"))

    def log_softmax(self, dim=-1, *, axis=None):
        return apply("log_softmax", self, dim=checks.one_dim(self, dim, axis, "log_softmax"))

    # --- shapes ------------------------------------------------------------------------------
    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        problem = checks.reshape_error(self.data.shape, shape)
        if problem:
            raise ValueError(f"reshape: cannot reshape {self.data.shape} ({self.data.size} numbers) into {shape}: "
                             f"{problem}")
        return apply("reshape", self, shape=shape)

    view = reshape  # PyTorch's view never copies; haaw's reshape copies only where NumPy must

    def unsqueeze(self, dim: int):
        """A new axis of length 1 at ``dim`` (from -ndim-1 to ndim, as in PyTorch: -1 puts it last)."""
        n = self.ndim + 1
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or not -n <= dim < n:
            raise IndexError(f"unsqueeze: dim {dim!r} is out of range for a tensor of shape {self.shape} (expected "
                             f"an integer from {-n} to {n - 1})")
        shape = list(self.shape)
        shape.insert(int(dim) % n, 1)
        return self.reshape(tuple(shape))

    def squeeze(self, dim=None):
        """The axes of length 1 removed: all of them, or those of ``dim`` (an int or a tuple) that have length 1. An
        axis of another length named in ``dim`` is left as it is, without error, as PyTorch leaves it."""
        dims = range(self.ndim) if dim is None else checks.dims(self, dim, None, "squeeze") or ()
        return self.reshape(tuple(n for i, n in enumerate(self.shape) if not (i in dims and n == 1)))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        """The axes from ``start_dim`` to ``end_dim`` (both included) joined into one, as PyTorch's ``flatten``;
        a 0-d tensor becomes shape (1,)."""
        if self.ndim == 0:
            return self.reshape(1)
        (start,), (end,) = checks.dims(self, start_dim, None, "flatten"), checks.dims(self, end_dim, None, "flatten")
        if start > end:
            raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (shape {self.shape}), "
                               "which PyTorch refuses too")
        return self.reshape(self.shape[:start] + (-1,) + self.shape[end + 1:])

    def expand(self, *sizes):
        """The tensor broadcast to ``sizes`` (-1 keeps an axis; new axes go in front), as PyTorch's ``expand``;
        backward sums the gradient over the copies. haaw's is a copy, PyTorch's a view of the same memory."""
        sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ValueError(f"expand: {len(sizes)} sizes for a tensor of {self.ndim} axes (shape {self.shape}): "
                             "give one size for each axis, and more for new leading axes")
        target = tuple(self.shape[i - lead] if n == -1 and i >= lead else n for i, n in enumerate(sizes))
        try:
            np.broadcast_shapes(self.shape, target)
        except ValueError:
            raise ValueError(f"expand: a tensor of shape {self.shape} cannot be expanded to {sizes}: only axes of "
                             "length 1 can grow (as in PyTorch)") from None
        return self + wrap(np.zeros(target, dtype=self.dtype))  # the add's backward is the sum over the copies

    def permute(self, *dims):
        """Reorder all the axes: output axis i is input axis ``dims[i]``."""
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return apply("permute", self, dims=checks.permutation(dims, self.ndim, self.shape))

    def transpose(self, dim0: int, dim1: int):
        """Swap two axes (PyTorch's meaning; NumPy's ``transpose(axes)`` is ``permute`` here)."""
        dims = list(range(self.ndim))
        if self.ndim:
            (a,), (b,) = checks.dims(self, dim0, None, "transpose"), checks.dims(self, dim1, None, "transpose")
            dims[a], dims[b] = dims[b], dims[a]
        return self.permute(dims)

    swapaxes = transpose  # NumPy's name for the same swap

    @property
    def T(self):
        """All axes reversed: the transpose of a matrix."""
        return self.permute(tuple(range(self.ndim))[::-1])

    def __getitem__(self, index):
        if isinstance(index, Tensor):
            index = index.data
        elif isinstance(index, tuple):  # x[idx, 0]: the getitem operation copies idx's array, as it copies arrays
            index = tuple(i.data if isinstance(i, Tensor) else i for i in index)
        try:
            self.data[index]
        except IndexError as err:
            raise IndexError(f"indexing a tensor of shape {self.data.shape}: {err}") from None
        return apply("getitem", self, index=index)

    # --- changing the number format ----------------------------------------------------------------
    def to(self, dtype):
        """The same numbers in another format (``np.float16``, ``"bfloat16"``, ...); the gradient flows back
        converted to this tensor's format, as with PyTorch's ``.to(dtype)``. An integer or bool result is not in
        the graph: it has no gradient, as in PyTorch."""
        dtype = dtypes.as_dtype(dtype)
        if dtype == self.dtype:
            return self
        if not dtypes.is_float(dtype):
            return wrap(self.data.astype(dtype))
        return apply("cast", self, dtype=dtype)

    def new_zeros(self, *size) -> "Tensor":
        """A tensor of zeros of shape ``size``, in this tensor's format, not requiring grad, as PyTorch's."""
        return self._new(size, 0, "new_zeros")

    def new_ones(self, *size) -> "Tensor":
        return self._new(size, 1, "new_ones")

    def new_full(self, size, fill_value) -> "Tensor":
        return self._new((size,), fill_value, "new_full")

    def _new(self, size, value, what) -> "Tensor":
        size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in size):
            raise TypeError(f"{what}: the size is whole numbers ≥ 0, as a tuple or one by one; got {size!r}")
        return wrap(np.full(size, value, dtype=self.dtype))

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def half(self):
        return self.to(np.float16)

    def bfloat16(self):
        return self.to("bfloat16")

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

    def size(self, dim=None):
        """The shape (PyTorch's name), or the length of axis ``dim``. ``numel()`` counts the entries."""
        return self.data.shape if dim is None else self.data.shape[dim]

    def numel(self) -> int:
        return self.data.size

    def dim(self) -> int:
        """The number of axes (PyTorch's name for ``ndim``)."""
        return self.data.ndim

    def tolist(self):
        """The entries as nested Python lists (a 0-d tensor: its number), as PyTorch's ``tolist``."""
        return self.data.tolist()

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor: it holds one number, x.item()")
        return len(self.data)

    def __iter__(self):
        """Its rows (entries along the first axis), as PyTorch iterates; a 0-d tensor is refused, as in PyTorch,
        where Python's fallback would quietly find no entries at all."""
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor: it holds one number, x.item()")
        return (self[i] for i in range(len(self.data)))

    def __contains__(self, element) -> bool:
        """``element in x``: is it equal to any entry (PyTorch's answer), not is it one of the rows by identity."""
        other = element.data if isinstance(element, Tensor) else element
        return bool(np.any(self.data == other))

    # --- comparisons: elementwise, as in PyTorch, giving a bool tensor outside the graph --------------------
    __hash__ = object.__hash__  # by identity, as PyTorch's: sets and dicts of tensors keep working

    def _compare(self, other, ufunc):
        if isinstance(other, Tensor):
            other = other.data
        elif not isinstance(other, (Number, np.generic, np.ndarray)):
            return NotImplemented  # x == "a" is False, by Python's own rule
        return wrap(ufunc(self.data, other))

    def __eq__(self, other):
        return self._compare(other, np.equal)

    def __ne__(self, other):
        return self._compare(other, np.not_equal)

    def __lt__(self, other):
        return self._compare(other, np.less)

    def __le__(self, other):
        return self._compare(other, np.less_equal)

    def __gt__(self, other):
        return self._compare(other, np.greater)

    def __ge__(self, other):
        return self._compare(other, np.greater_equal)

    def any(self) -> "Tensor":
        return wrap(np.asarray(self.data.any()))

    def all(self) -> "Tensor":
        return wrap(np.asarray(self.data.all()))

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(f"the truth value of a tensor of shape {self.data.shape} is ambiguous: use "
                               "(x > 0).any() or .all(), or compare one entry")
        return bool(self.data.item())

    def numpy(self) -> np.ndarray:
        """The array itself (shared, not copied), like PyTorch's ``.numpy()``."""
        return self.data

    def item(self) -> float:
        if self.data.size != 1:
            raise RuntimeError(f"item(): a tensor of shape {self.shape} holds {self.data.size} numbers, not one "
                               "(PyTorch refuses it too). Reduce it first (x.sum().item()), pick one entry "
                               "(x[0, 0].item()), or take them all with x.tolist()")
        return self.data.item()

    def __float__(self) -> float:
        return float(self._one("float"))

    def __int__(self) -> int:
        return int(self._one("int"))

    def _one(self, what):
        if self.data.size != 1:
            raise ValueError(f"{what}() of a tensor of shape {self.shape}: only a tensor of one number converts to "
                             "a Python number, as in PyTorch")
        return self.data.item()

    def __array__(self, dtype=None, copy=None):
        if self.requires_grad:
            raise TypeError("NumPy was given a Tensor that requires a gradient: NumPy cannot record it in the "
                            "graph. Use the Tensor's own operations, or pass t.detach().numpy() for a plain array.")
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self) -> str:
        body = np.array2string(self.data, precision=4, separator=", ", threshold=20, prefix="Tensor(")
        extras = "".join([f", dtype={self.data.dtype}" if self.data.dtype != np.float64 else "",
                          ", requires_grad=True" if self.requires_grad else "",
                          f", label={self.label!r}" if self.label else ""])
        return f"Tensor({body}{extras})"


# What x.max(dim) and x.min(dim) return, as PyTorch's torch.return_types: a tuple with named fields
_RESULTS = {name: namedtuple(name, ("values", "indices")) for name in ("max", "min")}

# PyTorch's Tensor names a learner reaches for that haaw leaves out, and what to write in haaw instead
_PYTORCH_ONLY = {
    "values": "x.max(dim) and x.min(dim) return (values, indices), as PyTorch's do: .values belongs to that "
              "result. x.max() with no dim is one tensor, the value itself",
    "indices": "x.max(dim) and x.min(dim) return (values, indices), as PyTorch's do: .indices belongs to that "
               "result (x.argmax(dim) gives it alone). x.max() with no dim is one tensor: x.argmax() says where",
    "clone": "x * 1 is a copy that stays in the graph; x.detach() shares the numbers without it",
    "contiguous": "haaw's tensors hold NumPy arrays, laid out as NumPy needs: leave .contiguous() out",
    "abs": "haaw.where(x < 0, -x, x) has the same values and gradient",
    "sqrt": "Write x ** 0.5",
    "pow": "Write x ** p",
    "long": "Write x.to(np.int64)",
    "int": "Write x.to(np.int32)",
    "bool": "Write x.to(np.bool_), or compare: x != 0",
    "mT": "Write x.transpose(-2, -1)",
    "t": "Write x.T (or x.transpose(0, 1))",
    "cpu": "haaw runs on the CPU, in NumPy: leave .cpu() out",
    "cuda": "haaw runs on the CPU, in NumPy: there is no GPU to move to",
    "device": "haaw runs on the CPU, in NumPy: every tensor is on the one device",
    "masked_fill": "Write haaw.where(mask, value, x)",
    "norm": "Write (x * x).sum() ** 0.5",
    "dot": "Write (x * y).sum()",
    "clip": "haaw's name is clamp: x.clamp(min, max)",
    "clamp_min": "Write x.clamp(min=...)",
    "clamp_max": "Write x.clamp(max=...)",
    "type_as": "Write x.to(other.dtype)",
    "view_as": "Write x.reshape(other.shape)",
    "reshape_as": "Write x.reshape(other.shape)",
    "expand_as": "Write x.expand(other.shape)",
    "add_": "Write x += y (under haaw.no_grad() for a leaf that requires grad)",
    "sub_": "Write x -= y (under haaw.no_grad() for a leaf that requires grad)",
    "mul_": "Write x *= y (under haaw.no_grad() for a leaf that requires grad)",
    "div_": "Write x /= y (under haaw.no_grad() for a leaf that requires grad)",
    "zero_": "Write x[...] = 0 (under haaw.no_grad() for a leaf that requires grad); a gradient is a NumPy "
             "array: x.grad = None, or x.zero_grad()",
    "fill_": "Write x[...] = value (under haaw.no_grad() for a leaf that requires grad)",
    "unbind": "list(x) gives the rows (along axis 0); x.permute(...) first for another axis",
    "eq": "Write x == y", "ne": "Write x != y", "lt": "Write x < y", "le": "Write x <= y", "gt": "Write x > y",
    "ge": "Write x >= y",
}


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` takes that one hook off its tensor (again: nothing more)."""

    __slots__ = ("tensor", "hook")

    def __init__(self, tensor: Tensor, hook):
        self.tensor, self.hook = tensor, hook

    def remove(self) -> None:
        self.tensor._hooks = tuple(h for h in self.tensor._hooks if h is not self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def _list_depth(data) -> int:
    """How many lists (or tuples) deep ``data``'s first number is: the axes the lists alone give. NumPy's array having
    more means something inside (a tensor, an array) gave axes of its own."""
    depth = 0
    while isinstance(data, (list, tuple)) and data:
        data, depth = data[0], depth + 1
    return depth


def _holds_tensor(data) -> bool:
    return any(isinstance(e, Tensor) or isinstance(e, (list, tuple)) and _holds_tensor(e) for e in data)


def _entries(data):
    """Nested lists with every Tensor in them replaced by its one number, as ``torch.tensor`` reads them (a tensor
    of several numbers is refused, as there: ``stack`` joins tensors)."""
    if isinstance(data, Tensor):
        if data.data.size != 1:
            raise TypeError(f"tensor(): a list holding a tensor of shape {data.shape}: each tensor in the list "
                            "stands for one number, as in PyTorch. To join tensors into one, write "
                            "haaw.stack([a, b]) (a new axis) or haaw.cat([a, b])")
        return data.data.reshape(())[()]  # a NumPy number: it keeps the tensor's dtype
    if isinstance(data, (list, tuple)):
        return [_entries(e) for e in data]
    return data


def _castable(name: str, instead: str, dtype, value) -> None:
    """Refuse ``int_t += 0.5``, ``int_t /= 2`` or ``bool_t += 1``, as PyTorch does: the result is of a wider kind
    than the tensor it must be written back into, and NumPy's unsafe cast would cut it silently."""
    if name == "x[...] = ...":
        return
    v = value.data if isinstance(value, Tensor) else np.asarray(value)
    kind = "f" if dtypes.is_float(v.dtype) or name == "x /= ..." else v.dtype.kind
    rank = {"b": 0, "i": 1, "u": 1, "f": 2, "V": 2}
    mine = "f" if dtypes.is_float(dtype) else dtype.kind
    if rank.get(kind, 3) > rank[mine]:
        wanted = {"f": "floats", "i": "integers", "u": "integers", "c": "complex numbers"}.get(kind, f"{v.dtype}")
        raise RuntimeError(f"{name}: the result is {wanted}, which cannot be written back into this {dtype} tensor "
                           f"without cutting it (PyTorch refuses it too). Write {instead} instead: a new tensor, "
                           f"of the result's type.")


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    if a.ndim < 2 or b.ndim < 2:  # NumPy would accept vectors and quietly change the shapes
        raise ValueError(checks.shape_error("matmul", [a.data, b.data]))
    return apply("matmul", a, b)


def _all_grads(op, ctx, upstream, vjp=None) -> list:
    """Call an all-at-once VJP (custom operations, cat, yours); keep the gradients of inputs that need one."""
    grads = (vjp or op.vjp_all)(ctx, upstream)
    grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
    if len(grads) != len(ctx.needs_input_grad):
        raise ValueError(f"the backward of '{op.name}' returned {len(grads)} gradient(s) for "
                         f"{len(ctx.needs_input_grad)} input(s): return one per input (None where there is none)")
    return [None if g is None or not need else np.asarray(g)
            for g, need in zip(grads, ctx.needs_input_grad)]


def changed_in_place(t: "Tensor") -> None:
    """Record that ``t``'s data was changed in place outside an operation (an optimizer's step), as every
    in-place operator records it: a graph that saved the old values then refuses to run backward on them."""
    t._vc[0] += 1


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A new Tensor holding a copy of ``data`` (PyTorch's ``torch.tensor``)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A Tensor that shares ``array``'s memory (PyTorch's ``torch.from_numpy``).

    Edits made through NumPy afterwards are invisible to the version counter, exactly as in
    PyTorch: if backward needs the values, copy instead (``Tensor(array)``).
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a NumPy array, got {type(array).__name__}")
    problem = checks.number_format_error(array.dtype)
    if problem:
        raise TypeError(problem)
    return wrap(array)


def where(condition, input, other) -> Tensor:
    """``input`` where ``condition`` is True, ``other`` elsewhere, broadcast together (``torch.where``). Either of
    ``input`` and ``other`` may be a number; the condition gets no gradient."""
    like = input if isinstance(input, Tensor) else other
    if not isinstance(like, Tensor):
        like = Tensor(input)
    condition = condition.data if isinstance(condition, Tensor) else condition
    return apply("where", _lift(input, like), _lift(other, like), condition=condition)


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis ``dim`` (PyTorch's ``torch.stack``): each is reshaped to have
    an axis of 1 there, then they are ``cat``-ed, so each gets back its own slice of the gradient."""
    if isinstance(tensors, (Tensor, np.ndarray)):
        raise TypeError("stack: takes a list or tuple of tensors, as in PyTorch; got one tensor (write stack([a, b]))")
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    shapes = {t.shape for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"stack: every tensor must have the same shape; got {sorted(shapes)}")
    (shape,) = shapes
    if not -len(shape) - 1 <= dim <= len(shape):
        raise IndexError(f"stack: dim {dim} is out of range for tensors of {len(shape)} dimensions "
                         f"(from {-len(shape) - 1} to {len(shape)})")
    d = dim % (len(shape) + 1)
    return cat([t.reshape(shape[:d] + (1,) + shape[d:]) for t in tensors], dim=d)


def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along ``dim``; each gets back its own slice of the gradient."""
    if isinstance(tensors, (Tensor, np.ndarray)):  # iterating one tensor would give its rows
        raise TypeError("cat: takes a list or tuple of tensors, as in PyTorch; got one tensor (write cat([a, b]))")
    tensors = [t if isinstance(t, Tensor) else Tensor(t) for t in tensors]
    if not tensors:
        raise ValueError("cat: needs at least one tensor")
    shapes = [t.shape for t in tensors]
    if len({len(s) for s in shapes}) != 1 or not shapes[0]:
        raise ValueError(f"cat: shapes {shapes} must all have the same number of dimensions (at least 1)")
    (d,) = checks.dims(tensors[0], dim, None, "cat")
    if len({s[:d] + s[d + 1:] for s in shapes}) != 1:
        raise ValueError(f"cat along dim {dim}: shapes {shapes} must match in every other dimension")
    return apply("cat", *tensors, dim=d)
