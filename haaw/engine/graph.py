"""What instruments may read of a graph's nodes: the tools draw, step through, count and measure graphs with
these, never with the nodes' private attributes, so the engine may change what it keeps."""
from __future__ import annotations

from .tensor import Tensor
from .value import Value


def is_node(x) -> bool:
    """True for a haaw Value or Tensor, False for anything else. (Not ``isinstance(x, Node)``: a runtime protocol
    check reads every attribute of the protocol, and reading ``.grad`` of a torch tensor that is not a leaf makes
    PyTorch print a warning.)"""
    return isinstance(x, (Tensor, Value))


def parents(node) -> tuple:
    """The nodes ``node`` was computed from, in argument order (empty for a leaf)."""
    return tuple(node._parents)


def local(node) -> tuple:
    """A Value's local derivatives d(node)/d(parent), computed in the forward pass, one for each of ``parents(node)``
    in the same order (empty for a leaf). A Tensor keeps none (its operation's backward works them out from what
    ``context(node)`` saved): TypeError."""
    if not isinstance(node, Value):
        raise TypeError(f"local(): only a Value keeps its local derivatives, not a {type(node).__name__}")
    return tuple(node._local)


def operation(node) -> str:
    """The name of the operation that computed ``node`` ("" for a leaf): "*", "**2", "matmul", ..."""
    return node._op


def context(node):
    """What the operation that computed a Tensor saved for backward (its ``ctx``: ``ctx.op`` is the operation),
    or None for a leaf or a Value."""
    return getattr(node, "_ctx", None)
