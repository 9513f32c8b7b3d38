"""``Value``: one number that remembers how it was computed, for notebooks 01 and 02.

Each operation computes its result and, right beside it, the local derivative of the result
with respect to each input (``_local``). Backward then only multiplies: a parent receives
``upstream * local``. Storing numbers instead of closures keeps the graph free of reference
cycles and makes every local derivative visible to the step-through explorer. That is this
engine's choice, not the only one: the matrix engine (``Tensor``, notebook 03 on), like PyTorch,
keeps the inputs an operation's backward needs and forms the products during backward.
"""
from __future__ import annotations

import math
from numbers import Real

import numpy as np

from . import autograd, plugins


def _number(x, what: str) -> float:
    """``x`` as a float (a NumPy scalar or 0-d array is welcome), or a TypeError that says what was expected."""
    if type(x) is float or type(x) is int:  # the common case, without the abstract-class checks below
        return float(x)
    if isinstance(x, Real) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0 and np.isrealobj(x) and x.dtype != bool:
        return float(x)
    raise TypeError(f"{what} must be a real number, got {type(x).__name__} {x!r:.40}")


def _locals(slot: str, local, inputs: int) -> tuple:
    """The local derivatives your function returned in ``slot``, one per input, or a ValueError that says so: a
    tuple of the wrong length would otherwise be cut to the shorter one, and a gradient silently lost."""
    try:
        local = tuple(local)
    except TypeError:
        raise TypeError(f"your function in the engine's {slot!r} slot returned {local!r:.40} as its local derivatives: "
                        f"return (result, (d/d{'a, d/db' if inputs == 2 else 'a,'}))") from None
    if len(local) != inputs:
        raise ValueError(f"your function in the engine's {slot!r} slot returned {len(local)} local derivative"
                         f"{'s' if len(local) != 1 else ''} for {inputs} input{'s' if inputs != 1 else ''}: return one "
                         f"per input, in order ({'(d/da, d/db)' if inputs == 2 else '(d/da,)'})")
    return local


def _check_label(label) -> None:
    """Refuse micrograd's ``Value(data, _children, _op)``: here the second argument is the label."""
    if isinstance(label, str):
        return
    raise TypeError(f"Value(data, label): the second argument is a label, a str, not {type(label).__name__} "
                    f"{label!r:.40}. micrograd's Value(data, _children, _op) links a value to its parents by hand and "
                    "sets its _backward after; haaw's operations record the parents and their local derivatives "
                    "themselves. Build the value with an operation (a + b, a.tanh()), or write Value(data, label='name')")


class Value:
    """A scalar in a computation graph: ``.data`` forward, ``.grad`` after ``backward()``."""

    __slots__ = ("data", "grad", "label", "_parents", "_local", "_op")

    def __init__(self, data, label: str = "", _parents: tuple = (), _local: tuple = (), _op: str = ""):
        if label.__class__ is not str:  # (one comparison: every operation makes a Value)
            _check_label(label)
        self.data = data if type(data) is float else _number(data, "Value(data)")
        self.grad = 0.0
        self.label = label
        self._parents = _parents
        self._local = _local  # d(self)/d(parent) for each parent, computed in the forward pass
        self._op = _op

    # --- the node protocol the shared backward algorithm relies on (autograd.Node) ---------
    def _reset_grad(self) -> None:
        self.grad = 0.0

    def _vjp(self, upstream: float) -> list:
        """The chain rule on numbers: each parent's contribution is upstream × its local derivative."""
        return [upstream * local for local in self._local]

    def _add_grad(self, g: float) -> None:
        self.grad += g

    def backward(self) -> None:
        """dL/d(node) for every node this one depends on, L being this value.

        Leaf grads accumulate over calls, like PyTorch: reset them with ``zero_grad()``.
        """
        yours = plugins.overrides().get("backward")
        if yours:
            yours(self)
            return
        autograd.backward(self, 1.0)

    def zero_grad(self) -> None:
        """Forget this value's accumulated gradient (set ``.grad`` back to 0)."""
        self.grad = 0.0

    # --- arithmetic: result and local derivatives, side by side -----------------------
    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(_number(other, "the other operand of +"))
        yours = plugins.overrides().get("add")
        if yours:
            out, local = yours(self.data, other.data)
            return Value(out, "", (self, other), _locals("add", local, 2), "+")
        return Value(self.data + other.data, "", (self, other), (1.0, 1.0), "+")

    def __sub__(self, other):
        other = other if isinstance(other, Value) else Value(_number(other, "the other operand of -"))
        return Value(self.data - other.data, "", (self, other), (1.0, -1.0), "-")

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(_number(other, "the other operand of *"))
        yours = plugins.overrides().get("mul")
        if yours:
            out, local = yours(self.data, other.data)
            return Value(out, "", (self, other), _locals("mul", local, 2), "*")
        return Value(self.data * other.data, "", (self, other), (other.data, self.data), "*")

    def __truediv__(self, other):
        other = other if isinstance(other, Value) else Value(_number(other, "the divisor"))
        if other.data == 0.0:
            raise ZeroDivisionError(f"division by zero: {self._name()} / {other._name()}, and the divisor is 0")
        b = other.data
        return Value(self.data / b, "", (self, other), (1.0 / b, -self.data / (b * b)), "/")

    def __pow__(self, exponent):
        if isinstance(exponent, Value):
            raise TypeError(
                "Value ** Value is not supported: the exponent must be a plain number. "
                "For a learnable exponent write (exponent * base.log()).exp()."
            )
        n = _number(exponent, "the exponent")
        yours = plugins.overrides().get("pow")
        if yours:
            out, local = yours(self.data, n)
            return Value(out, "", (self,), _locals("pow", local, 1), f"**{n:g}")
        try:
            out = self.data**n
            local = n * self.data ** (n - 1) if n != 0 else 0.0
        except ZeroDivisionError:
            if n < 0:
                raise ZeroDivisionError(f"{self._name()} ** {n:g} is undefined at {self._name()} = 0") from None
            out, local = 0.0, math.inf  # 0 ** 0.5 is 0, with an infinite slope there, as PyTorch says
        except OverflowError:
            raise OverflowError(f"{self._name()} ** {n:g} is too large for a float "
                                f"({self._name()} = {self.data:g}; floats stop near 1.8e308)") from None
        if isinstance(out, complex):
            raise ValueError(f"{self.data:g} ** {n:g} is not a real number (negative base, fractional exponent)")
        return Value(out, "", (self,), (local,), f"**{n:g}")

    def __neg__(self):
        return Value(-self.data, "", (self,), (-1.0,), "neg")

    def __radd__(self, other):
        return Value(_number(other, "the other operand of +")) + self

    def __rsub__(self, other):
        return Value(_number(other, "the other operand of -")) - self

    def __rmul__(self, other):
        return Value(_number(other, "the other operand of *")) * self

    def __rtruediv__(self, other):
        return Value(_number(other, "the dividend")) / self

    def __rpow__(self, base):
        c = _number(base, "the base")
        if c <= 0:
            raise ValueError(f"{c:g} ** Value needs a positive base (got {c:g})")
        out = c**self.data
        return Value(out, "", (self,), (out * math.log(c),), f"{c:g}**")

    # --- functions --------------------------------------------------------------------
    def relu(self):
        x = self.data
        return Value(x if x > 0 else 0.0, "", (self,), (1.0 if x > 0 else 0.0,), "relu")

    def tanh(self):
        yours = plugins.overrides().get("scalar_tanh")
        if yours:
            out, local = yours(self.data)
            return Value(out, "", (self,), _locals("scalar_tanh", local, 1), "tanh")
        t = math.tanh(self.data)
        return Value(t, "", (self,), (1.0 - t * t,), "tanh")

    def exp(self):
        yours = plugins.overrides().get("exp")
        if yours:
            out, local = yours(self.data)
            return Value(out, "", (self,), _locals("exp", local, 1), "exp")
        try:
            e = math.exp(self.data)
        except OverflowError:
            raise OverflowError(f"exp({self.data:g}) is too large for a float (limit about exp(709))") from None
        return Value(e, "", (self,), (e,), "exp")

    def log(self):
        x = self.data
        if x <= 0:
            raise ValueError(f"log is defined for positive numbers only; {self._name()} = {x:g}")
        return Value(math.log(x), "", (self,), (1.0 / x,), "log")

    def sigmoid(self):
        x = self.data
        if x >= 0:  # two forms, so that exp never overflows
            s = 1.0 / (1.0 + math.exp(-x))
        else:
            e = math.exp(x)
            s = e / (1.0 + e)
        return Value(s, "", (self,), (s * (1.0 - s),), "sigmoid")

    # --- display ----------------------------------------------------------------------
    def _name(self) -> str:
        return self.label or f"{self.data:g}"

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label else ""
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g}{label})"

    def __float__(self) -> float:
        return self.data


# --- slots where your own code can run instead (haaw.use, notebooks 01 and 02) ---------------
plugins.slot("add", "add(a, b) -> (a+b, (d/da, d/db)) on numbers: the scalar engine's +")
plugins.slot("mul", "mul(a, b) -> (a·b, (d/da, d/db)) on numbers: the scalar engine's *")
plugins.slot("pow", "pow(a, n) -> (aⁿ, (d/da,)) on numbers: the scalar engine's **")
plugins.slot("scalar_tanh", "tanh(a) -> (tanh a, (d/da,)) on numbers: the scalar engine's tanh (the slot 'tanh' "
                            "is the matrix engine's)")
plugins.slot("exp", "exp(a) -> (eᵃ, (d/da,)) on numbers: the scalar engine's exp")
plugins.slot("backward", "backward(root): fill .grad of every Value root depends on, root.grad = 1")
