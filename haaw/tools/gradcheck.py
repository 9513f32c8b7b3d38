"""Gradient checking: the engine's gradients against central finite differences.

Finite differences need no calculus, only the forward pass, so they are the oracle that
never shares a bug with backward. They are done in float64 with a central difference,
(f(x + h) - f(x - h)) / 2h, whose error shrinks like h² rather than h.

Inputs are converted to float64 arrays and rebuilt as fresh leaves for every evaluation,
so the same code serves scalars (``Value``) now and tensors later: an input kind only has
to say how to make a leaf from an array and how to read its gradient back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine import Value

def _value_leaf(array):
    return Value(float(array))


def _tensor_leaf(array):
    from ..engine import Tensor

    return Tensor(array.copy(), requires_grad=True)


def _leaf_maker(x):
    """Inputs that are numbers or Values are checked as Values; arrays and Tensors as Tensors."""
    if isinstance(x, Value) or (np.ndim(x) == 0 and not hasattr(x, "shape")):
        return _value_leaf
    return _tensor_leaf


def _grad_of(leaf, shape) -> np.ndarray:
    grad = leaf.grad
    return np.zeros(shape) if grad is None else np.asarray(grad, dtype=np.float64).reshape(shape)


@dataclass
class Row:
    name: str
    analytic: np.ndarray
    numeric: np.ndarray
    ok: bool

    @property
    def rel_error(self) -> float:
        """max |a - n| / max(|a|, |n|): 0 where both are exactly 0."""
        scale = np.maximum(np.abs(self.analytic), np.abs(self.numeric))
        diff = np.abs(self.analytic - self.numeric)
        rel = np.divide(diff, scale, out=np.zeros_like(diff), where=scale > 0)
        return float(np.max(rel, initial=0.0))


@dataclass
class GradcheckReport:
    rows: list
    rtol: float
    atol: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def worst(self) -> float:
        """The largest relative error of any input (its last digits vary between CPUs; the verdict does not)."""
        return max((r.rel_error for r in self.rows), default=0.0)

    def __str__(self) -> str:
        # Each input's verdict, not its measured error: an error of 1e-10 on this CPU is 3e-10 on the
        # next, whose vector units round the forward pass's last bits differently.
        verdict = "all agree" if self.ok else "MISMATCH"
        lines = [f"gradcheck: {len(self.rows)} input(s), {verdict} "
                 f"(test: |backward - finite diff.| <= {self.atol:g} + {self.rtol:g}·|finite diff.|)"]
        lines.append(f"  {'input':<8}{'backward':>16}{'finite diff.':>16}")
        for r in self.rows:
            a, n = r.analytic.ravel(), r.numeric.ravel()
            shown = (f"{a[0]:16.6g}{n[0]:16.6g}" if a.size == 1
                     else f"{'(' + str(a.size) + ' entries)':>16}{'':>16}")
            lines.append(f"  {r.name:<8}{shown}  " + ("ok" if r.ok else f"WRONG (relative error {r.rel_error:.2g})"))
        return "\n".join(lines)

    __repr__ = __str__


def gradcheck(f, *inputs, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-8,
              names=None, seed: int = 0) -> GradcheckReport:
    """Compare backward's gradient of ``f(*inputs)`` with central differences.

    ``f`` takes as many arguments as there are inputs. If it returns a scalar, its gradient
    is checked; if it returns an array, a random upstream gradient u is drawn and the
    vector-Jacobian product is checked instead: backward(u) against the finite differences of
    sum(f(x) · u), which tests every entry of the Jacobian at the cost of one backward pass.
    Inputs may be numbers, Values, arrays or Tensors; their grads are not touched.
    """
    if not inputs:
        raise TypeError("gradcheck needs at least one input to differentiate with respect to")
    makers = [_leaf_maker(x) for x in inputs]
    bases = [np.array(getattr(x, "data", x), dtype=np.float64) for x in inputs]
    if names is None:
        names = [getattr(x, "label", "") or f"x{i}" for i, x in enumerate(inputs)]

    def evaluate(arrays):
        leaves = [make(a) for make, a in zip(makers, arrays)]
        out = f(*leaves)
        if not hasattr(out, "backward"):
            raise TypeError(f"gradcheck: f must return a haaw Value or Tensor, got {type(out).__name__}")
        return leaves, out

    leaves, out = evaluate(bases)
    out_data = np.asarray(out.data, dtype=np.float64)
    upstream = None if out_data.size == 1 else np.random.default_rng(seed).standard_normal(out_data.shape)
    if upstream is None:
        out.backward()
    else:
        out.backward(upstream)
    analytic = [_grad_of(leaf, base.shape) for leaf, base in zip(leaves, bases)]

    def scalar(arrays) -> float:
        data = np.asarray(evaluate(arrays)[1].data, dtype=np.float64)
        return float(data.sum() if upstream is None else np.sum(data * upstream))

    rows = []
    for i, base in enumerate(bases):
        numeric = np.zeros_like(base)
        for index in np.ndindex(base.shape):
            shifted = [b.copy() for b in bases]
            shifted[i][index] = base[index] + eps
            plus = scalar(shifted)
            shifted[i][index] = base[index] - eps
            numeric[index] = (plus - scalar(shifted)) / (2 * eps)
        ok = bool(np.all(np.abs(analytic[i] - numeric) <= atol + rtol * np.abs(numeric)))
        rows.append(Row(names[i], analytic[i], numeric, ok))
    return GradcheckReport(rows, rtol, atol)
