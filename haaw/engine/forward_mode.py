"""Forward mode, for comparison: a number that carries its derivative along with it.

A ``Dual`` holds a value and a *tangent*, d(value)/dθ for one chosen input θ. Each operation
updates both at once, so a single forward pass yields the derivative with respect to that one θ.
A gradient over n parameters therefore needs n passes; reverse mode (``backward``) gets all n
from one. ``forward_mode_gradient`` counts the passes it makes.

The local derivatives are not written again here: each operation asks the scalar engine
(``Value``) for them. Forward and reverse mode multiply the same local derivatives; they differ
only in the direction: forward mode pushes tangents from the inputs towards the output, reverse
mode pulls adjoints from the output back to the inputs.

The two compose. ``gradient(f)`` runs reverse mode, the engine's one backward algorithm, on nodes
whose numbers are ``Dual``s: backward only multiplies and adds, so every number it computes
carries its own tangent. Give the inputs the tangents v and the gradient comes back with H·v, the
Hessian times v, in its tangents: forward mode over reverse mode (notebook 02's companion).
"""
from __future__ import annotations

from . import autograd
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


class DualNode:
    """A node of the scalar engine's kind whose value, local derivatives and gradient are ``Dual``s.

    Each local derivative is written in ``Dual`` arithmetic (1 − t² with t a Dual, not a float), so
    it carries its own tangent: how it moves when the inputs move along their tangents. The
    shared ``autograd.backward`` walks these nodes as it walks ``Value``s."""

    __slots__ = ("data", "grad", "_parents", "_local")

    def __init__(self, data, _parents: tuple = (), _local: tuple = ()):
        self.data = data if isinstance(data, Dual) else Dual(data)
        self.grad = Dual(0.0)
        self._parents, self._local = _parents, _local

    # the node protocol (autograd.Node)
    def _reset_grad(self) -> None:
        self.grad = Dual(0.0)

    def _add_grad(self, g) -> None:
        self.grad = self.grad + g

    def _vjp(self, upstream) -> list:
        return [upstream * local for local in self._local]

    # arithmetic: the result and its local derivatives, both Duals
    def __add__(self, other):
        other = _node(other)
        return DualNode(self.data + other.data, (self, other), (Dual(1.0), Dual(1.0)))

    def __sub__(self, other):
        other = _node(other)
        return DualNode(self.data - other.data, (self, other), (Dual(1.0), Dual(-1.0)))

    def __mul__(self, other):
        other = _node(other)
        return DualNode(self.data * other.data, (self, other), (other.data, self.data))

    def __truediv__(self, other):
        other = _node(other)
        inverse = 1.0 / other.data
        return DualNode(self.data * inverse, (self, other), (inverse, -self.data * inverse * inverse))

    def __pow__(self, n: float):
        return DualNode(self.data**n, (self,), (n * self.data ** (n - 1) if n != 0 else Dual(0.0),))

    def __neg__(self):
        return DualNode(-self.data, (self,), (Dual(-1.0),))

    __radd__ = __add__
    __rmul__ = __mul__

    def __rsub__(self, other):
        return _node(other) - self

    def __rtruediv__(self, other):
        return _node(other) / self

    def tanh(self):
        t = self.data.tanh()
        return DualNode(t, (self,), (1.0 - t * t,))

    def exp(self):
        e = self.data.exp()
        return DualNode(e, (self,), (e,))

    def log(self):
        return DualNode(self.data.log(), (self,), (1.0 / self.data,))

    def sigmoid(self):
        s = self.data.sigmoid()
        return DualNode(s, (self,), (s * (1.0 - s),))

    def relu(self):  # a kink at 0: its second derivative is 0 everywhere else
        return DualNode(self.data.relu(), (self,), (Dual(1.0 if self.data.data > 0 else 0.0),))

    def __repr__(self) -> str:
        return f"DualNode(data={self.data!r}, grad={self.grad!r})"


def _node(x) -> DualNode:
    return x if isinstance(x, DualNode) else DualNode(x)


def gradient(f):
    """``grad(*xs)``: the gradient of scalar ``f(*xs)`` by reverse mode, one ``Dual`` per input.

    The inputs may be floats or ``Dual``s. With ``Dual(x_i, v_i)`` the gradients' tangents are H·v,
    the Hessian of f at x times v; with floats the tangents are 0. ``f`` is written as for
    ``Value``s: operators and the methods tanh, exp, log, sigmoid, relu."""
    def grad(*xs) -> list:
        leaves = [DualNode(x) for x in xs]
        autograd.backward(f(*leaves), Dual(1.0))
        return [leaf.grad for leaf in leaves]
    return grad
