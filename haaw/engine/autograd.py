"""The one backward algorithm that both node types share: ``Value`` (a number) and ``Tensor`` (an array).

A node is anything that meets ``Node`` below: it knows the nodes it was computed from (``_parents``), holds
its gradient (``grad``, reset by ``_reset_grad``, added to by ``_add_grad``), and turns the gradient that
reaches it into one contribution per parent, by the chain rule: contribution = upstream × local derivative
(``_vjp``). A ``Value`` keeps its local derivatives as numbers (``_local``), so each contribution is one
product. A ``Tensor``'s local derivatives are Jacobians, far too large to build: its operation's
vector-Jacobian products give the products directly (``None`` for a parent that needs no gradient).

Backward puts the graph in topological order, then walks it backwards, *adding* every
contribution into its parent, so that a node used twice receives both. The walk uses an explicit
stack, not recursion (a chain of 10,000 nodes is fine), and visits parents in argument order,
never in set order, so every run is the same. A graph of Values that no ``on_step`` watches runs the
same two loops with the node methods written out in place (``_values_backward``), for speed.
"""
from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol, Sequence, runtime_checkable

from .guard import refusable


@runtime_checkable
class Node(Protocol):
    """What the backward algorithm asks of a node; ``Value`` and ``Tensor`` both meet it."""

    _parents: tuple
    grad: object

    def _reset_grad(self) -> None: ...

    def _add_grad(self, g) -> None: ...

    def _vjp(self, upstream) -> Sequence:  # one contribution per parent, None where a parent needs none
        ...


@refusable("autograd.topological_order", "the engine's topological_order")
def topological_order(root: Node) -> list:
    """Every node ``root`` depends on, each after all of its parents (``root`` last).

    A depth-first walk with a stack of its own: ``path`` holds the nodes being visited, each over the one that
    uses it, and ``left`` an iterator over the parents each of them has still to look at, in argument order. The
    node on top goes into the order once it has no parent left to visit: every one of its parents is in already.
    (Notebook 02's sort pushes (node, parents_done) pairs instead and reaches the same order; one iterator a node,
    never pushed twice, takes a tenth less time, and this sort runs on every backward.)"""
    order, visited = [], {root}  # nodes hash by identity: no node defines ==
    path, left = [root], [iter(root._parents)]
    while path:
        for parent in left[-1]:
            if parent not in visited:  # a parent visited already is in the order (a graph has no cycles)
                visited.add(parent)
                path.append(parent)
                left.append(iter(parent._parents))
                break
        else:
            left.pop()
            order.append(path.pop())
    return order


@refusable("autograd.backward", "the engine's backward (.backward() on a Value or Tensor)")
def backward(root: Node, seed, on_step=None) -> list:
    """Fill ``.grad`` of every node ``root`` depends on with dL/d(node), L being ``root``.

    Leaves *accumulate* (like PyTorch, so the gradients of several losses add up until they
    are zeroed); an intermediate node's ``.grad`` holds what this pass sent it.
    ``on_step(node, upstream, contributions)``, if given, is called after each node has passed
    its gradient on: the step-through explorer watches the pass this way.
    Returns the nodes in the order they were visited, ``root`` first.
    """
    order = topological_order(root)
    order.reverse()
    if on_step is None and hasattr(root, "_local"):  # Values keep their local derivatives as numbers
        _values_backward(order, seed)
        return order
    hooked, held, outer = set(), {}, _held.get()
    for node in order:
        if node._parents:
            node._reset_grad()
        if getattr(node, "_hooks", ()) and node not in outer:  # Tensor.register_hook: see _run_hooks
            hooked.add(node)
            if not node._parents:  # a leaf's hooks see this pass's gradient alone: set aside what it holds
                held[node], node.grad = node.grad, None
    token = _held.set(outer | held.keys())
    try:
        root._add_grad(seed)
        for node in order:
            parents = node._parents
            if not parents:
                continue
            if hooked and node in hooked:  # all of its gradient has arrived (None: none did, and hooks hear so)
                node.grad = node._run_hooks(node.grad)
            upstream = node.grad
            if upstream is None:  # no gradient reached it (a Function gave None for it): nothing to pass on
                continue
            contributions = node._vjp(upstream)
            for parent, contribution in zip(parents, contributions):
                if contribution is not None:
                    parent._add_grad(contribution)
            if on_step is not None:
                on_step(node, upstream, contributions)
        for leaf, earlier in held.items():  # last: a checkpoint's recomputation may add to a leaf it captured
            # a leaf switched off with requires_grad_(False) since the forward pass is left alone (PyTorch hands
            # its hooks the gradient it then drops; haaw never computes it)
            grad = leaf._run_hooks(leaf.grad) if leaf.requires_grad else None
            leaf.grad = earlier if grad is None else grad if earlier is None else earlier + grad
    except BaseException:
        for leaf, earlier in held.items():  # a hook or an operation failed: the hooked leaves keep what they had
            leaf.grad = earlier
        raise
    finally:
        _held.reset(token)
    return order


# The leaves whose hooks an enclosing pass runs: a checkpoint's recomputation, a backward inside backward, adds
# to them and leaves the hooks to that pass, which runs them once on the whole gradient, as PyTorch's one pass.
_held: ContextVar[frozenset] = ContextVar("haaw_hooked_leaves", default=frozenset())


def _values_backward(order: list, seed: float) -> None:
    """``backward``'s two loops for a graph of Values that no ``on_step`` watches, ``order`` root first: the same
    steps, with ``_reset_grad``, ``_vjp`` (upstream × local) and ``_add_grad`` (+=) written out in place and a
    node's two parents unpacked rather than zipped. Those calls and zips were half the time the scalar engine's
    backward took, which made it slower than micrograd's (benchmarks/scalar_step.py); tests/engine/test_value.py
    checks that both loops give the same gradients."""
    for node in order:
        if node._parents:
            node.grad = 0.0
    order[0].grad += seed
    for node in order:
        parents = node._parents
        if len(parents) == 2:  # +, -, *, /: most of a graph
            (a, b), (da, db) = parents, node._local
            upstream = node.grad
            a.grad += upstream * da
            b.grad += upstream * db
        elif parents:
            upstream = node.grad
            for parent, local in zip(parents, node._local):
                parent.grad += upstream * local
