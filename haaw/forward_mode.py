"""Forward mode, for comparison: a number that carries its derivative along with it.

A ``Dual`` holds a value and a *tangent*, d(value)/dθ for one chosen input θ. Every
operation updates both at once, so a single forward pass yields the derivative with respect
to that one θ. A gradient over n parameters therefore needs n passes; reverse mode
(``backward``) gets all n from one. ``forward_mode_gradient`` counts the passes it makes.
"""
from __future__ import annotations

import math


class Dual:
    __slots__ = ("data", "tangent")

    def __init__(self, data: float, tangent: float = 0.0):
        self.data, self.tangent = float(data), float(tangent)

    @staticmethod
    def _lift(other) -> "Dual":
        return other if isinstance(other, Dual) else Dual(other)

    def __add__(self, other):
        o = self._lift(other)
        return Dual(self.data + o.data, self.tangent + o.tangent)

    def __sub__(self, other):
        o = self._lift(other)
        return Dual(self.data - o.data, self.tangent - o.tangent)

    def __mul__(self, other):
        o = self._lift(other)
        return Dual(self.data * o.data, self.tangent * o.data + self.data * o.tangent)

    def __truediv__(self, other):
        o = self._lift(other)
        return Dual(self.data / o.data, (self.tangent * o.data - self.data * o.tangent) / o.data**2)

    def __pow__(self, n: float):
        return Dual(self.data**n, n * self.data ** (n - 1) * self.tangent)

    def __neg__(self):
        return Dual(-self.data, -self.tangent)

    __radd__ = __add__
    __rmul__ = __mul__

    def __rsub__(self, other):
        return self._lift(other) - self

    def __rtruediv__(self, other):
        return self._lift(other) / self

    def tanh(self):
        t = math.tanh(self.data)
        return Dual(t, (1 - t * t) * self.tangent)

    def relu(self):
        return Dual(max(self.data, 0.0), self.tangent if self.data > 0 else 0.0)

    def exp(self):
        e = math.exp(self.data)
        return Dual(e, e * self.tangent)

    def log(self):
        return Dual(math.log(self.data), self.tangent / self.data)

    def sigmoid(self):
        s = 1.0 / (1.0 + math.exp(-self.data))
        return Dual(s, s * (1 - s) * self.tangent)

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
