"""The tiny chain of notebook 01, y = w·x and L = y², computed by the engine.

One function used by the notebook, the explorer and the tests, so the numbers the learner
sees, the picture and the claims ledger can never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine import Value
from ..engine.graph import local


@dataclass(frozen=True)
class ChainStep:
    w: float
    x: float
    lr: float
    y: float
    loss: float
    dL_dy: float
    dy_dw: float
    dL_dw: float
    w_new: float
    loss_new: float

    def __str__(self) -> str:
        return (f"forward : y = {self.w:g}·{self.x:g} = {self.y:g},  L = y² = {self.loss:g}\n"
                f"backward: dL/dy = 2y = {self.dL_dy:g},  dy/dw = x = {self.dy_dw:g},  "
                f"dL/dw = {self.dL_dw:g}\n"
                f"update  : w ← {self.w:g} − {self.lr:g}·{self.dL_dw:g} = {self.w_new:.4g}, "
                f"L becomes {self.loss_new:.4g}")


def tiny_chain_step(w: float = 2.0, x: float = 3.0, lr: float = 0.01) -> ChainStep:
    """Forward, backward and one gradient-descent step on L = (w·x)²."""
    wv, xv = Value(w, label="w"), Value(x, label="x")
    y = wv * xv
    loss = y**2
    loss.backward()
    w_new = w - lr * wv.grad
    return ChainStep(w, x, lr, y.data, loss.data, y.grad, local(y)[0],
                     wv.grad, w_new, (w_new * x) ** 2)
