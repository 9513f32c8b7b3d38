"""The one backward algorithm that every haaw node type shares.

A node is anything with four attributes:

- ``_parents``: the nodes it was computed from, in argument order (empty for a leaf);
- ``_vjp(grad)``: given dL/d(node), returns one contribution per parent, dL/d(parent)
  through this node (``None`` where a parent needs none);
- ``grad``: where dL/d(node) is accumulated;
- ``_reset_grad()`` and ``_add_grad(g)``: how that accumulation starts and grows.

Backward walks the graph once in reverse topological order and *adds* every contribution
into its parent, so a node used twice receives both. The walk is iterative (no recursion
limit) and deterministic (parents are visited in argument order, never in set order).
Nodes keep only their parents and the numbers their derivative needs, never themselves,
so a finished graph is freed by reference counting without waiting for the cycle collector.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def topological_order(root) -> list:
    """Every node ``root`` depends on, each after all of its parents (root last)."""
    order = []
    visited = set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        # reversed, so that the first parent is popped, and ordered, first
        for parent in reversed(node._parents):
            if id(parent) not in visited:
                stack.append((parent, False))
    return order


def backward(root, seed, on_step=None) -> list:
    """Fill ``.grad`` of every node ``root`` depends on with dL/d(node), L being ``root``.

    Leaves *accumulate* (like PyTorch, so gradients of several losses add up until
    zeroed); an intermediate node's ``.grad`` holds the adjoint of this pass only.
    ``on_step(node, upstream, contributions)`` is called after each node has passed its
    gradient on: the step-through explorer and later the instruments hook in here.
    Returns the nodes in the order they were visited.
    """
    order = topological_order(root)
    for node in order:
        if node._parents:
            node._reset_grad()
    root._add_grad(seed)
    visit = order[::-1]
    for node in visit:
        parents = node._parents
        if not parents:
            continue
        upstream = node.grad
        contributions = node._vjp(upstream)
        for parent, contribution in zip(parents, contributions):
            if contribution is not None:
                parent._add_grad(contribution)
        if on_step is not None:
            on_step(node, upstream, contributions)
    return visit


@dataclass
class Step:
    """One node's turn in the backward pass, as the step-through explorer shows it."""

    node: Any
    upstream: Any
    contributions: tuple
    grads_after: dict = field(repr=False)  # id(node) -> grad once this step is done


def trace_backward(root, seed=1.0) -> tuple[dict, list[Step]]:
    """Record a fresh backward pass on ``root``: every node's grad at the start, then each step.

    The pass starts from zero everywhere but the seeded root, and the graph's own grads are
    put back afterwards, so tracing a graph (as the step-through explorer does) never adds
    to gradients a learner has already computed.
    """
    order = topological_order(root)
    saved = [n.grad for n in order]
    steps = []

    def snapshot():
        return {id(n): _copy(n.grad) for n in order}

    def record(node, upstream, contributions):
        steps.append(Step(node, _copy(upstream), tuple(contributions), snapshot()))

    try:
        for n in order:
            n._reset_grad()
        start = snapshot()
        start[id(root)] = start[id(root)] + seed
        backward(root, seed, on_step=record)
    finally:
        for n, grad in zip(order, saved):
            n.grad = grad
    return start, steps


def _copy(x):
    return x.copy() if hasattr(x, "copy") else x
