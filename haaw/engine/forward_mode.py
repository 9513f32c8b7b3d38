"""Forward mode, for comparison: a number that carries its derivative along with it.

A ``Dual`` holds a value and a *tangent*, d(value)/dθ for one chosen input θ. Each operation
updates both at once, so a single forward pass yields the derivative with respect to that one θ.
A gradient over n parameters therefore needs n passes; reverse mode (``backward``) gets all n
from one. ``forward_mode_gradient`` counts the passes it makes.

The local derivatives are not written again here: each operation asks the scalar engine
(``Value``) for them. Forward and reverse mode multiply the same local derivatives; they differ
only in the direction: forward mode pushes tangents from the inputs towards the output, reverse
mode pulls adjoints from the output back to the inputs.
"""
from __future__ import annotations

from .value import Value


class Dual:
    __slots__ = ("data", "tangent")

    def __init__(self, data: float, tangent: float = 0.0):
        self.data, self.tangent = float(data), float(tangent)

    def _through(self, operation, *others) -> "Dual":
        """Run ``operation`` on Values to get its result and local derivatives; chain the tangents."""
        inputs = (self, *(o if isinstance(o, Dual) else Dual(o) for o in others))
        out = operation(*(Value(d.data) for d in inputs))
        return Dual(out.data, sum(local * d.tangent for local, d in zip(out._local, inputs)))

    def __add__(self, other):
        return self._through(Value.__add__, other)

    def __sub__(self, other):
        return self._through(Value.__sub__, other)

    def __mul__(self, other):
        return self._through(Value.__mul__, other)

    def __truediv__(self, other):
        return self._through(Value.__truediv__, other)

    def __pow__(self, n: float):
        return self._through(lambda v: v**n)

    def __neg__(self):
        return self._through(Value.__neg__)

    __radd__ = __add__
    __rmul__ = __mul__

    def __rsub__(self, other):
        return Dual(other) - self

    def __rtruediv__(self, other):
        return Dual(other) / self

    def tanh(self):
        return self._through(Value.tanh)

    def relu(self):
        return self._through(Value.relu)

    def exp(self):
        return self._through(Value.exp)

    def log(self):
        return self._through(Value.log)

    def sigmoid(self):
        return self._through(Value.sigmoid)

    def __repr__(self) -> str:
        return f"Dual(data={self.data:.6g}, tangent={self.tangent:.6g})"


def forward_mode_gradient(f, params) -> tuple[list[float], int]:
    """The gradient of scalar ``f(*params)``, one forward pass per parameter; and the passes made."""
    values = [float(getattr(p, "data", p)) for p in params]
    grads, passes = [], 0
    for i in range(len(values)):
        duals = [Dual(v, 1.0 if j == i else 0.0) for j, v in enumerate(values)]
        grads.append(f(*duals).tangent)
        passes += 1
    return grads, passes
