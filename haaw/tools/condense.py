"""A summary of a big graph: only the tensors you name, joined as the engine's graph joins them.

A transformer block's graph has hundreds of nodes; its story has seven (x, LN, attention, +,
LN, feed-forward, +). ``condense`` keeps the named tensors and connects each to the nearest named
tensors it was computed from, following the engine's own edges, so the picture cannot disagree
with what was computed. Each kept node shows the norm of its gradient.
"""
from __future__ import annotations

import numpy as np

from ..engine.autograd import topological_order
from ..engine.graph import parents


class Summary:
    """A kept tensor: its label, the step that produced it, its data, and ‖dL/d(tensor)‖."""

    __slots__ = ("label", "_op", "data", "grad", "_parents")

    def __init__(self, label, op, data, grad, parents):
        self.label, self._op, self.data, self.grad, self._parents = label, op, data, grad, parents


def condense(root, keep: dict) -> Summary:
    """``keep``: id(tensor) -> (label, step name). Returns the summary node of ``root``."""
    summaries = {}
    for node in topological_order(root):  # parents before children, so theirs exist already
        if id(node) not in keep:
            continue
        nearest, seen, stack = [], set(), list(reversed(parents(node)))
        while stack:  # walk back through unnamed nodes to the nearest named ones
            p = stack.pop()
            if id(p) in seen:
                continue
            seen.add(id(p))
            if id(p) in keep:
                nearest.append(summaries[id(p)])
            else:
                stack.extend(reversed(parents(p)))
        label, step = keep[id(node)]
        norm = None if node.grad is None else float(np.linalg.norm(node.grad))
        summaries[id(node)] = Summary(label, step if nearest else "", node.data, norm, tuple(nearest))
    if id(root) not in summaries:
        raise ValueError("condense: the root itself must be among the kept tensors")
    return summaries[id(root)]


def block_diagram(block, x, mask=None, upstream=None, seed: int = 0):
    """Run ``block`` (a TransformerBlock) forward and backward; draw its seven-step summary."""
    from .draw import draw_graph
    from ..engine import Tensor

    x = x if isinstance(x, Tensor) else Tensor(x, requires_grad=True)
    a = block.ln1(x)
    attended = block.attn(a, mask=mask)
    h = x + attended
    b = block.ln2(h)
    f = block.ff(b)
    out = h + f
    if upstream is None:
        upstream = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(upstream)
    keep = {id(x): ("x", ""), id(a): ("LN₁(x)", "LN"), id(attended): ("Attn", "Attn"),
            id(h): ("x + Attn", "+"), id(b): ("LN₂", "LN"), id(f): ("FFN", "FFN"), id(out): ("out", "+")}
    return draw_graph(condense(out, keep), title="one pre-norm block; grad = ‖dL/d·‖ after backward")
