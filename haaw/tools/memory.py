"""What the backward pass keeps alive: the arrays each operation saves for its backward.

Inside ``with track_memory() as memory:`` every recorded operation reports the arrays it saved
(what its forward kept on ``ctx``, see ``haaw/engine/ops.py``), and every backward step reports when its saved arrays have been
used. Arrays that belong to leaves (parameters, the input batch) are not counted: they exist
anyway; what is counted is what the forward pass created and kept only for the backward pass. ``memory.table()`` lists the bytes per operation; ``memory.peak`` is the most that was alive
at once, counting an array shared by two operations (a ReLU's output is also the next matmul's
input) once. The peak is normally reached right where forward ends and backward begins.
"""
from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from ..engine import hooks
from ..engine.graph import context, parents
from ..engine.tensor import Tensor


def saved_arrays(saved, leaves=frozenset(), _seen=None) -> list:
    """The arrays among the saved values, wherever they are kept: in tuples, lists and dicts (ctx.keep = [x, y]
    saves both), in the attributes of an object (ctx.state = SimpleNamespace(x=x)), in a Tensor (its data).
    Code is not memory kept for backward: a function or module kept to run again (checkpoint's fn) is skipped,
    its parameters exist anyway. An array reached twice is listed once, and an array whose id is in ``leaves`` not
    at all."""
    seen = set() if _seen is None else _seen
    found = []
    for value in saved:
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, Tensor):
            value = value.data
        if isinstance(value, hooks.Packed):  # through saved_tensors_hooks: counted if pack kept an array here
            value = value.packed
        if isinstance(value, np.ndarray):
            if id(value) not in leaves:
                found.append(value)
        elif isinstance(value, (tuple, list, set, frozenset)):
            found += saved_arrays(value, leaves, seen)
        elif isinstance(value, dict):
            found += saved_arrays(value.values(), leaves, seen)
        elif hasattr(value, "__dict__") and not callable(value) and not isinstance(value, type):
            found += saved_arrays(vars(value).values(), leaves, seen)
    return found


class MemoryTracker:
    def __init__(self):
        self.by_op = defaultdict(lambda: [0, 0])  # op name -> [times, bytes saved]
        self._buffers = {}  # id(buffer) -> [buffer, number of nodes holding it]
        self._counted = {}  # id(node) -> (node, the arrays of its that were counted); holding the
        # node keeps its id from being reused by a later node while we track
        self._released = set()  # ids of nodes whose saved arrays backward has used
        self.current = 0
        self.peak = 0
        self.timeline = []  # (phase, op name, live bytes afterwards)

    def saved(self, node, op: str, saved, leaves=frozenset()) -> None:
        arrays = saved_arrays(saved, leaves)
        self._counted[id(node)] = (node, arrays)
        self.by_op[op][0] += 1
        self.by_op[op][1] += sum(a.nbytes for a in arrays)
        for a in arrays:
            buffer = a if a.base is None else a.base
            entry = self._buffers.setdefault(id(buffer), [buffer, 0])
            if entry[1] == 0:
                self.current += buffer.nbytes
            entry[1] += 1
        self.peak = max(self.peak, self.current)
        self.timeline.append(("forward", op, self.current))

    def released(self, node, op: str) -> None:
        if id(node) in self._released or id(node) not in self._counted:  # e.g. a second backward
            return
        self._released.add(id(node))
        for a in self._counted[id(node)][1]:
            buffer = a if a.base is None else a.base
            entry = self._buffers.get(id(buffer))
            if entry and entry[1] > 0:
                entry[1] -= 1
                if entry[1] == 0:
                    self.current -= buffer.nbytes
        self.timeline.append(("backward", op, self.current))

    @property
    def total_saved(self) -> int:
        return sum(nbytes for _, nbytes in self.by_op.values())

    def table(self) -> str:
        lines = [f"{'operation':<20}{'times':>7}{'bytes saved':>16}"]
        for name, (times, nbytes) in sorted(self.by_op.items(), key=lambda item: -item[1][1]):
            lines.append(f"{name:<20}{times:>7}{nbytes:>16,}")
        lines.append(f"{'total':<20}{sum(t for t, _ in self.by_op.values()):>7}{self.total_saved:>16,}")
        lines.append(f"peak alive at once (shared arrays counted once): {self.peak:,} bytes")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.table()


@contextmanager
def track_memory():
    """Account for every array saved for backward inside the block, and when it is released."""
    tracker = MemoryTracker()

    def forward(op, ctx, inputs, out):
        if ctx is not None:
            leaves = frozenset(id(t.data) for t in inputs if not parents(t))  # parameters, data
            tracker.saved(out, op.name, ctx.saved.values(), leaves)

    def backward(node):
        tracker.released(node, context(node).op.name)

    with hooks.registered("forward", forward), hooks.registered("backward", backward):
        yield tracker
