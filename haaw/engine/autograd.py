"""The one backward algorithm that both node types share: ``Value`` (a number) and ``Tensor`` (an array).

A node is anything with these attributes:

- ``_parents``: the nodes it was computed from, in argument order (empty for a leaf);
- ``grad``, with ``_reset_grad()`` and ``_add_grad(g)``: where dL/d(node) is accumulated;
- how its gradient reaches its parents, by the chain rule: contribution = upstream × local derivative.
  A ``Value`` keeps its local derivatives as numbers (``_local``), so each contribution is one
  product. A ``Tensor``'s local derivatives are Jacobians, far too large to build, so it has
  ``_vjp(g)`` instead: its operation's vector-Jacobian products, which give the products directly
  (``None`` for a parent that needs no gradient), and ``_local`` is None.

Backward puts the graph in topological order, then walks it backwards, *adding* every
contribution into its parent, so that a node used twice receives both. The walk uses an explicit
stack, not recursion (a chain of 10,000 nodes is fine), and visits parents in argument order,
never in set order, so every run is the same.
"""
from __future__ import annotations


def topological_order(root) -> list:
    """Every node ``root`` depends on, each after all of its parents (``root`` last)."""
    order, visited, stack = [], set(), [root]  # nodes are hashed by identity: no node defines ==
    while stack:
        node = stack.pop()
        if node is None:  # the marker: every parent of the node under it is in place
            order.append(stack.pop())
            continue
        if node in visited:
            continue
        visited.add(node)
        stack += (node, None)  # come back to this node once its parents are done
        for parent in reversed(node._parents):  # reversed: the first parent is taken first
            if parent not in visited:
                stack.append(parent)
    return order


def backward(root, seed, on_step=None) -> list:
    """Fill ``.grad`` of every node ``root`` depends on with dL/d(node), L being ``root``.

    Leaves *accumulate* (like PyTorch, so the gradients of several losses add up until they
    are zeroed); an intermediate node's ``.grad`` holds what this pass sent it.
    ``on_step(node, upstream, contributions)``, if given, is called after each node has passed
    its gradient on: the step-through explorer watches the pass this way.
    Returns the nodes in the order they were visited, ``root`` first.
    """
    order = topological_order(root)
    for node in order:
        if node._parents:
            node._reset_grad()
    root._add_grad(seed)
    order.reverse()
    for node in order:
        parents = node._parents
        if not parents:
            continue
        upstream = node.grad
        if node._local is not None:  # a Value: numbers, so += right here (a float's grad is a float)
            for parent, local in zip(parents, node._local):
                parent.grad += upstream * local
            contributions = [upstream * local for local in node._local] if on_step else None
        else:  # a Tensor: its operation's vector-Jacobian products
            contributions = node._vjp(upstream)
            for parent, contribution in zip(parents, contributions):
                if contribution is not None:
                    if not parent._parents and (contribution is upstream or contribution.base is not None):
                        # a leaf keeps an array of its own: upstream itself (x + y passes it on to both) or a view
                        # of it would make x.grad the very array of another tensor's .grad
                        contribution = contribution.copy()
                    parent._add_grad(contribution)
        if on_step is not None:
            on_step(node, upstream, contributions)
    return order
