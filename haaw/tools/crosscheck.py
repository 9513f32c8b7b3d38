"""Optional cross-checks against PyTorch, and one comparison helper used everywhere.

PyTorch is a second, independent implementation of the same mathematics: when our engine,
finite differences and torch agree, a bug would have to be in all three. The course must
still run without torch, so every torch cell asks ``optional_torch()`` first and skips with
a note when it answers ``None``. Setting ``HAAW_NO_TORCH=1`` pretends torch is absent, so
the tests can prove the course runs without it.
"""
from __future__ import annotations

import os

import numpy as np

from ..engine.graph import is_node

SKIP_NOTE = "PyTorch is not installed, so this cross-check is skipped (the course works without it)."


def optional_torch(quiet: bool = False):
    """The ``torch`` module, or ``None`` (after saying so) when it cannot be used."""
    if os.environ.get("HAAW_NO_TORCH"):
        torch = None
    else:
        try:
            import torch
        except ImportError:
            torch = None
    if torch is None and not quiet:
        print(SKIP_NOTE)
    return torch


def compare(name: str, ours, reference, rtol: float = 1e-7, atol: float = 1e-12) -> None:
    """Print a one-line verdict for ``ours`` against ``reference``: agrees (at the stated tolerance) or WRONG."""
    print(verdict(name, ours, reference, rtol, atol))


def verdict(name: str, ours, reference, rtol: float = 1e-7, atol: float = 1e-12) -> str:
    """The line ``compare`` prints; it starts with the name and contains WRONG on a mismatch.

    Agreement is ``np.allclose(ours, reference, rtol, atol)``, and the verdict says so at that tolerance,
    never how small the difference was: two libraries, or one library on two CPUs, round the last bits
    of a sum or an ``exp`` differently (vector units add in another order), so a measured difference
    of 1e-16 here is 1e-15 or exactly 0 on the next machine. A verdict reads the same on every machine.
    """
    a = _as_array(ours)
    b = _as_array(reference)
    if a.shape != b.shape:
        return f"{name:<12} WRONG  shapes differ: ours {a.shape}, reference {b.shape}"
    if np.allclose(a, b, rtol=rtol, atol=atol):
        return f"{name:<12} agrees (rtol {rtol:.0e})"
    diff = float(np.max(np.abs(a - b), initial=0.0))
    return f"{name:<12} WRONG (max diff {diff:.3g}, more than rtol {rtol:.0e} allows)"


def _as_array(x) -> np.ndarray:
    """A float64 array from a number, a haaw node, a NumPy array or a torch tensor."""
    if is_node(x):  # a haaw Value or Tensor
        x = x.data
    elif hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def torch_check(fn, *arrays, names=None, seed: int = 0, rtol: float = 1e-7, atol: float = 1e-12):
    """Run ``fn`` once on haaw tensors and once on torch tensors; compare output and gradients.

    ``fn`` is written once, with operations both libraries spell the same way (``@``, ``+``,
    ``.exp()``, ``.sum(dim=...)``, ``.softmax(dim)``, ``.transpose(0, 1)``...). A non-scalar output is given the same random
    upstream gradient in both. Prints one verdict line per quantity (or, without torch, that
    it skipped) and returns nothing, so a notebook cell ends with the verdicts alone.
    """
    torch = optional_torch()
    if torch is None:
        return
    from ..engine import Tensor

    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    names = names or [f"x{i}" for i in range(len(arrays))]
    ours = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = fn(*ours), fn(*theirs)
    if out.data.size == 1:  # a scalar: both start from dL/dL = 1
        out.backward()
        ref.backward()
    else:  # otherwise the same random upstream gradient for both
        upstream = np.random.default_rng(seed).standard_normal(out.shape)
        out.backward(upstream)
        ref.backward(torch.tensor(upstream).reshape(ref.shape))
    compare("output", out, ref, rtol, atol)
    for name, a, b in zip(names, ours, theirs):
        compare(f"d/d{name}", a.grad, b.grad, rtol, atol)
