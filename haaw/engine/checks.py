"""The engine's checks of what it is given, each named for what it checks, and the messages that say what is
wrong in the learner's terms: a shape, an axis, a permutation, a version changed in place."""
from __future__ import annotations

import math

import numpy as np

from . import dtypes


def versions_unchanged(node) -> None:
    """Refuse to run backward if an array this node's operation saved was changed in place since.

    The forward pass noted the version of every input and of the output. A changed version only
    matters if the operation kept that tensor's array for its backward, so only then is it an error.
    """
    ctx = node._ctx
    tensors = (*node._parents, node)
    for i, (t, (counter, version)) in enumerate(zip(tensors, ctx.versions)):
        if counter[0] != version and saved(ctx, t.data) and read_for_a_gradient(ctx, i):
            which = "its output" if t is node else f"input {i} (shape {t.shape})"
            raise RuntimeError(
                f"backward of '{ctx.op.name}' needs {which} as it was in the forward pass, but it was "
                f"modified in place afterwards (version {counter[0]}, saved at version {version}). "
                f"Use an out-of-place operation (y = x + 1, not x += 1), or copy the tensor first.")


def wrong_shape(op, i, g, parent):
    raise ValueError(f"the backward of '{op.name}' returned a gradient of shape {np.shape(g)} for its "
                     f"input {i}, which has shape {parent.data.shape}: a gradient has the shape of "
                     "what it is the gradient of")


# For the products, which inputs' arrays each input's gradient reads: d(a·b)/da reads b alone, d(a/b)/db reads
# both. An input edited in place whose array only the gradient of an input that needs none would read is no
# error: PyTorch saves each array only for a gradient that is wanted, and runs such a backward.
READS = {"mul": ((1,), (0,)), "matmul": ((1,), (0,)), "linear": ((1,), (0,), ()), "div": ((1,), (0, 1))}


def read_for_a_gradient(ctx, i: int) -> bool:
    """Does the backward of ``ctx``'s operation read input ``i``'s saved array for a gradient it computes?"""
    reads = READS.get(ctx.op.name)
    if reads is None or i >= len(reads):
        return True
    return any(i in read for read, need in zip(reads, ctx.needs_input_grad) if need)


def saved(ctx, array) -> bool:
    return any(v is array or (type(v) is tuple and any(x is array for x in v)) for v in vars(ctx).values())


def non_finite(array) -> bool:
    array = np.asarray(array)
    return array.dtype.kind in "fcV" and not np.all(np.isfinite(array.astype(np.float64, copy=False)))


def shape_error(op: str, arrays) -> str | None:
    """A learner-readable reason why ``op`` cannot combine these inputs, or None."""
    shapes = [a.shape for a in arrays]
    if op == "matmul":
        a, b = shapes
        if len(a) < 2 or len(b) < 2:
            return (f"matmul: {a} @ {b}: both sides need at least 2 dimensions; "
                    "reshape a vector to (1, n) or (n, 1)")
        if a[-1] != b[-2]:
            return f"matmul: {a} @ {b}: inner dimensions {a[-1]} and {b[-2]} differ"
        try:
            np.broadcast_shapes(a[:-2], b[:-2])
        except ValueError:
            return f"matmul: {a} @ {b}: batch dimensions {a[:-2]} and {b[:-2]} do not broadcast"
    elif op in ("add", "sub", "mul", "div"):
        try:
            np.broadcast_shapes(*shapes)
        except ValueError:
            return (f"{op}: shapes {shapes[0]} and {shapes[1]} cannot be broadcast together "
                    "(matching trailing dimensions must be equal, or one of them 1)")
    return None


def dims(t, dim, axis, what: str):
    """Of Tensor ``t``: ``dim`` (or NumPy's ``axis``) as a sorted tuple of non-negative axes; None means all."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{what}: pass dim= or axis=, not both (they are the same thing)")
        dim = axis
    if dim is None:
        return None
    if isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_)):
        dims = (dim,)
    elif isinstance(dim, (tuple, list)):
        dims = tuple(dim)
        if not dims:  # dim=() reduces over every axis, as in PyTorch
            return None
    else:
        raise TypeError(f"{what}: dim must be an integer or a tuple of integers, got {type(dim).__name__} {dim!r}")
    n = max(t.ndim, 1)  # like PyTorch, a 0-d tensor accepts dim 0 and -1
    for d in dims:
        if not isinstance(d, (int, np.integer)) or not -n <= d < n:
            raise IndexError(f"{what}: dim {d!r} is out of range for a tensor of shape {t.shape} "
                             f"(expected an integer from {-n} to {n - 1})")
    normal = tuple(sorted({int(d) % n for d in dims}))
    if len(normal) != len(dims):
        raise ValueError(f"{what}: dim {dim} names the same axis twice")
    return normal if t.ndim else None


def empty_reduction(t, dims, what: str) -> None:
    """Refuse the largest (or smallest) of no numbers, as PyTorch does: over an axis of length 0, or over all of an
    empty tensor. (A sum of no numbers is 0, a mean nan; a max has no value at all.)"""
    largest = "smallest" if what.endswith("min") else "largest"
    if dims is None:
        raise RuntimeError(f"{what}() of an empty tensor (shape {t.shape}): the {largest} of no numbers has no value. "
                           f"PyTorch refuses it too; give dim= to reduce over an axis that is not empty")
    for d in dims:
        if t.shape[d] == 0:
            raise IndexError(f"{what}(dim={d}) over an axis of length 0 (shape {t.shape}): the {largest} of no "
                             f"numbers has no value. PyTorch refuses it too; check the shape, or reduce over "
                             f"another axis")


def numpy_extras(what: str, out, dtype=None, takes_dtype: bool = False) -> None:
    """np.sum(t), np.mean(t) and np.max(t) call t.sum(axis=..., dtype=None, out=None): accept them unused. Sum and
    mean take dtype= (as PyTorch's do), pass ``takes_dtype`` and no ``dtype``; max and min pass the one given."""
    if takes_dtype and out is not None:
        raise TypeError(f"{what}: haaw takes no out= (every result is a new tensor)")
    if not takes_dtype and (dtype is not None or out is not None):
        raise TypeError(f"{what}: haaw takes no dtype= or out= (convert with .to(dtype) first)")


def correction(dim, unbiased, correction, what: str) -> int:
    """var's and std's divisor N − correction from PyTorch's arguments: ``unbiased`` (True: 1, False: 0), which may
    come first (``x.var(False)``) or second (``x.var(0, False)``), or ``correction``; 1 if neither is given."""
    if isinstance(dim, (bool, np.bool_)):  # x.var(False): the bool is unbiased, as in PyTorch
        if unbiased is not None:
            raise TypeError(f"{what}: the first argument is a bool, read as unbiased (PyTorch's {what}(unbiased)); "
                            "then give no second one. For dim and unbiased write x.var(0, False)")
        unbiased = dim
    if unbiased is None:
        return 1 if correction is None else correction
    if not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"{what}: the second argument is unbiased, a bool, as in PyTorch (got {unbiased!r}); keepdim "
                        f"comes third, or by name: x.{what}(0, keepdim=True)")
    if correction is not None:
        raise TypeError(f"{what}: give unbiased= or correction=, not both (PyTorch refuses both too); "
                        "unbiased=False is correction=0")
    return int(unbiased)


def keep(keepdim, keepdims) -> bool:
    return bool(keepdim if keepdims is None else keepdims)


def one_dim(t, dim, axis, what) -> int:
    given = dim if axis is None else axis
    if isinstance(given, (tuple, list)):
        raise TypeError(f"{what}: dim must be one integer (it works along one axis), got {given!r}")
    axes = dims(t, dim if axis is None else None, axis, what)
    return -1 if axes is None else axes[0]




def number_format_error(dtype) -> str | None:
    """Why a Tensor cannot hold an array of ``dtype`` (strings, objects, complex numbers), or None."""
    if dtype.kind not in "biuf" and not dtypes.is_float(dtype):
        return f"Tensor holds numbers; got an array of dtype {dtype}"
    return None


def reshape_error(shape: tuple, to: tuple) -> str | None:
    """Why an array of ``shape`` cannot take the shape ``to`` (one entry may be -1: inferred), or None.
    The rule NumPy applies, stated, instead of trying it on an array."""
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) for n in to):
        return "the new shape holds something that is not an integer"
    if any(n > np.iinfo(np.intp).max for n in to):
        return "a size is larger than an array can have"
    if sum(n == -1 for n in to) > 1 or any(n < -1 for n in to):
        return "at most one entry may be -1 (inferred from the others), and no other entry may be negative"
    size, known = math.prod(shape), math.prod(n for n in to if n != -1)
    fits = (known != 0 and size % known == 0) if -1 in to else known == size
    return None if fits else "the number of entries differs"


def permutation(dims: tuple, n: int, shape: tuple) -> tuple:
    """``dims`` as non-negative axes, if it names each of the ``n`` axes exactly once; else a ValueError."""
    given = [int(d) % n for d in dims if isinstance(d, (int, np.integer)) and -n <= d < n]
    if len(dims) != n or len(given) != n or sorted(given) != list(range(n)):
        raise ValueError(f"permute{dims}: a tensor of shape {shape} needs each of its {n} axes "
                         f"exactly once (numbers from {-n} to {n - 1})")
    return tuple(given)
