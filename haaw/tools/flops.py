"""Counting floating-point operations, forward and backward, per operation.

Inside ``with count_flops() as counter:`` every tensor operation adds its cost (the formulas
sit beside each operation in ``haaw/engine/ops.py``; the counter reaches the engine through its hooks): one multiply or one add is one flop, so a matmul
(m×k)@(k×n) costs 2·m·k·n forward and the same again for *each* input that needs a gradient.
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager

from ..engine import hooks
from ..engine.graph import context, parents


class FlopCounter:
    def __init__(self):
        self.forward = defaultdict(int)  # op name -> flops
        self.backward = defaultdict(int)
        self.recompute = defaultdict(int)  # forward work done again during backward (checkpointing)

    @property
    def total_forward(self) -> int:
        return sum(self.forward.values())

    @property
    def total_backward(self) -> int:
        return sum(self.backward.values())

    @property
    def total_recompute(self) -> int:
        return sum(self.recompute.values())

    def table(self) -> str:
        """Per operation: forward flops, backward flops and their ratio."""
        lines = [f"{'operation':<20}{'forward':>14}{'backward':>14}{'bwd/fwd':>9}"]
        for name in sorted(set(self.forward) | set(self.backward), key=lambda n: -self.forward[n]):
            f, b = self.forward[name], self.backward[name]
            ratio = f"{b / f:.2f}" if f else "-"
            lines.append(f"{name:<20}{f:>14,}{b:>14,}{ratio:>9}")
        f, b = self.total_forward, self.total_backward
        lines.append(f"{'total':<20}{f:>14,}{b:>14,}{(b / f if f else 0):>9.2f}")
        if self.recompute:
            lines.append(f"{'recomputed forward':<20}{self.total_recompute:>14,}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()


@contextmanager
def count_flops():
    """Count the flops of every tensor operation run inside the block, forward and backward."""
    counter = FlopCounter()

    def forward(op, ctx, inputs, out):
        if hooks.reused():  # selective checkpointing reused the forward pass's result: nothing was computed
            return
        needs = tuple(t.requires_grad for t in inputs)
        direction = counter.recompute if hooks.recomputing() else counter.forward
        direction[op.name] += op.flops([t.data for t in inputs], out.data, needs)[0]

    def backward(node):
        ctx = context(node)
        counter.backward[ctx.op.name] += ctx.op.flops([p.data for p in parents(node)], node.data,
                                                      ctx.needs_input_grad)[1]

    with hooks.registered("forward", forward), hooks.registered("backward", backward):
        yield counter
