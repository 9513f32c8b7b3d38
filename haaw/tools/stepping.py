"""The backward pass one node at a time: recorded, told in words and coloured (the step-through explorer).

A step is one node passing its gradient on: it receives the upstream gradient dL/d(node),
multiplies it by the local derivative d(node)/d(parent) for each parent, and *adds* the
product into that parent's grad. ``trace_backward`` records the steps of a fresh pass,
``grads_at`` replays them up to any step, ``describe_step`` says one in words and
``step_highlights`` picks what to colour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..engine.autograd import backward, topological_order
from ..engine.graph import operation, parents

CURRENT, RECEIVING = "#f6b26b", "#b6d7a8"


@dataclass
class Step:
    """One node's turn in the backward pass: what it received and what it sent each parent."""

    node: Any
    upstream: Any
    contributions: tuple


def trace_backward(root) -> tuple[dict, list[Step]]:
    """Record a fresh backward pass on ``root``: every node's grad at the start, then each step.

    The pass starts from nothing everywhere but the seeded root, and the graph's own grads are
    put back afterwards, so tracing a graph (as the step-through explorer does) never adds to
    gradients a learner has already computed. Works on Values and Tensors alike, and keeps only
    what each step sends, so memory grows with the graph, not with its square.
    """
    import numpy as np

    order = topological_order(root)
    saved = [n.grad for n in order]
    seed = np.ones_like(root.data) if isinstance(root.data, np.ndarray) else 1.0
    steps = []
    try:
        for n in order:
            n.zero_grad()
        start = {id(n): n.grad for n in order}
        start[id(root)] = _plus(start[id(root)], seed)
        backward(root, seed, on_step=lambda node, up, sent: steps.append(Step(node, up, tuple(sent))))
    finally:
        for n, grad in zip(order, saved):
            n.grad = grad
    return start, steps


def _plus(grad, contribution):
    if contribution is None:
        return grad
    return contribution if grad is None else grad + contribution


def grads_at(start: dict, steps: list, k: int) -> dict:
    """id(node) -> its grad once steps 1..k have run (k = 0: the start)."""
    grads = dict(start)
    for step in steps[:k]:
        for parent, contribution in zip(parents(step.node), step.contributions):
            grads[id(parent)] = _plus(grads[id(parent)], contribution)
    return grads


def _name(node) -> str:
    if node.label or operation(node):
        return node.label or f"({operation(node)})"
    shape = getattr(node.data, "shape", ())
    return f"tensor{shape}" if shape else f"{float(node.data):g}"


def _formula(node) -> str:
    names = [_name(p) for p in parents(node)]
    if len(names) == 2 and operation(node) in "+-*/":
        return f"{names[0]} {operation(node)} {names[1]}"
    if operation(node).startswith("**"):
        return f"{names[0]}{operation(node)}"
    return f"{operation(node)}({', '.join(names)})"


def _fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def describe_step(root, start: dict, steps: list, k: int) -> str:
    """Step ``k`` of the trace in words; step 0 is the start, before any node has run."""
    if k == 0:
        return (f"Start: d{_name(root)}/d{_name(root)} = 1 is the seed at {_name(root)}; "
                "every other gradient starts at 0.\n"
                f"Move the slider: {len(steps)} node(s) will pass their gradient on, "
                "in reverse topological order.")
    step = steps[k - 1]
    node = step.node
    before = grads_at(start, steps, k - 1)
    lines = [f"Step {k} of {len(steps)}: {_name(node)} = {_formula(node)}",
             f"  upstream gradient  dL/d{_name(node)} = {_fmt(step.upstream)}"]
    locals_ = getattr(node, "_local", None)
    for i, (parent, contribution) in enumerate(zip(parents(node), step.contributions)):
        local = locals_[i] if locals_ is not None else None
        was = before[id(parent)]
        before[id(parent)] = _plus(was, contribution)
        lines.append(
            f"  → {_name(parent)}: local ∂{_name(node)}/∂{_name(parent)} = {_fmt(local)} (this node alone), "
            f"contribution {_fmt(step.upstream)} × {_fmt(local)} = {_fmt(contribution)}, "
            f"{_name(parent)}.grad {_fmt(was)} += {_fmt(contribution)} → {_fmt(before[id(parent)])}")
    return "\n".join(lines)


def step_highlights(steps: list, k: int) -> tuple[dict, dict]:
    """Colours (node being processed, parents receiving) and '+=' notes for step ``k``."""
    if k == 0:
        return {}, {}
    step = steps[k - 1]
    highlight = {id(p): RECEIVING for p in parents(step.node)}
    highlight[id(step.node)] = CURRENT
    notes = {(id(p), id(step.node), i): f"+= {_fmt(c)}"
             for i, (p, c) in enumerate(zip(parents(step.node), step.contributions))}
    return highlight, notes
