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

from .value import Value

_SCALAR_KIND = (
    lambda array: Value(float(array)),  # make a leaf
    lambda leaf: np.asarray(leaf.grad, dtype=np.float64),  # read its gradient
    lambda out: float(out.data),  # the output as a float
)


def _kind_of(x):
    if isinstance(x, Value) or np.ndim(x) == 0:
        return _SCALAR_KIND
    raise TypeError(f"gradcheck: cannot check an input of type {type(x).__name__} yet")


@dataclass
class Row:
    name: str
    analytic: np.ndarray
    numeric: np.ndarray
    ok: bool

    @property
    def max_abs_error(self) -> float:
        return float(np.max(np.abs(self.analytic - self.numeric), initial=0.0))

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

    def __str__(self) -> str:
        verdict = "all agree" if self.ok else "MISMATCH"
        worst = max((r.rel_error for r in self.rows), default=0.0)
        lines = [f"gradcheck: {len(self.rows)} input(s), {verdict} (max relative error {worst:.1e})"]
        lines.append(f"  {'input':<8}{'backward':>16}{'finite diff.':>16}{'rel. error':>12}")
        for r in self.rows:
            a, n = r.analytic.ravel(), r.numeric.ravel()
            shown = (f"{a[0]:16.8g}{n[0]:16.8g}" if a.size == 1
                     else f"{'(' + str(a.size) + ' entries)':>16}{'':>16}")
            lines.append(f"  {r.name:<8}{shown}{r.rel_error:12.1e}  {'ok' if r.ok else 'WRONG'}")
        if not self.ok:
            lines.append(f"  (agreement means |backward - finite diff.| <= {self.atol:g} + {self.rtol:g}·|finite diff.|)")
        return "\n".join(lines)

    __repr__ = __str__


def gradcheck(f, *inputs, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-8,
              names=None) -> GradcheckReport:
    """Compare backward's gradient of ``f(*inputs)`` with central differences.

    ``f`` takes as many arguments as there are inputs and returns a scalar node. Inputs
    may be numbers or leaves; their current values are used, their grads are not touched.
    """
    if not inputs:
        raise TypeError("gradcheck needs at least one input to differentiate with respect to")
    kinds = [_kind_of(x) for x in inputs]
    bases = [np.array(getattr(x, "data", x), dtype=np.float64) for x in inputs]
    if names is None:
        names = [getattr(x, "label", "") or f"x{i}" for i, x in enumerate(inputs)]

    def evaluate(arrays):
        leaves = [kind[0](a) for kind, a in zip(kinds, arrays)]
        out = f(*leaves)
        if not hasattr(out, "backward"):
            raise TypeError(f"gradcheck: f must return a haaw value, got {type(out).__name__}")
        return leaves, out

    leaves, out = evaluate(bases)
    out.backward()
    analytic = [kind[1](leaf) for kind, leaf in zip(kinds, leaves)]

    rows = []
    for i, (kind, base) in enumerate(zip(kinds, bases)):
        numeric = np.zeros_like(base)
        for index in np.ndindex(base.shape):
            values = []
            for sign in (+1.0, -1.0):
                shifted = [b.copy() for b in bases]
                shifted[i][index] += sign * eps
                values.append(kind[2](evaluate(shifted)[1]))
            numeric[index] = (values[0] - values[1]) / (2 * eps)
        ok = bool(np.all(np.abs(analytic[i] - numeric) <= atol + rtol * np.abs(numeric)))
        rows.append(Row(names[i], analytic[i], numeric, ok))
    return GradcheckReport(rows, rtol, atol)
