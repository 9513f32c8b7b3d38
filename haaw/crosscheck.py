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


def compare(name: str, ours, reference, rtol: float = 1e-7, atol: float = 1e-12) -> bool:
    """Print a one-line verdict for ``ours`` against ``reference``: exact, close or WRONG."""
    a = _as_array(ours)
    b = _as_array(reference)
    if a.shape != b.shape:
        print(f"{name:<12} WRONG  shapes differ: ours {a.shape}, reference {b.shape}")
        return False
    diff = float(np.max(np.abs(a - b), initial=0.0))
    if np.array_equal(a, b):
        verdict = "exact"
    elif np.allclose(a, b, rtol=rtol, atol=atol):
        verdict = f"close (max diff {diff:.1e})"
    else:
        verdict = f"WRONG (max diff {diff:.3g})"
    print(f"{name:<12} {verdict}")
    return not verdict.startswith("WRONG")


def _as_array(x) -> np.ndarray:
    """A float64 array from a number, a haaw node, a NumPy array or a torch tensor."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    elif hasattr(x, "data") and not isinstance(x, np.ndarray):  # a haaw node
        x = x.data
    return np.asarray(x, dtype=np.float64)
