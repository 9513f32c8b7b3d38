"""What a code exercise's function promises to handle, declared once: its ``Domain``.

A checker's teaching cases are chosen by hand, to be worked through and to name mistakes; what they leave out is
where wrong code passes (a 4-D batch, a scale that grows past 2^24, an overflow in the third tensor). So every
code exercise also declares its domain, the space its inputs come from, as a few axes: the ranks its arrays may
have, their dtypes, the kinds of values in them, the exponents, the counts that divide (tokens, rows, workers),
the thresholds to cross. ``check`` runs the teaching cases first, then cases drawn from the domain with a seed of
the exercise's own: the same cases on every run, and together they take every entry of every axis at least once,
in combinations the seed picks. The exercise's ``draw(rng, pick)`` turns one combination into a case.

``keeps_dtype`` names the outputs that keep their inputs' floating-point dtype (a gradient of float32 inputs is
float32): ``check`` refuses another dtype there, on any case, with what to look for.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

DRAWN = "drawn from its domain"  # the kind of every drawn case, listed when a function passes
AXES = ("ranks", "dtypes", "values", "exponents", "counts", "thresholds")

# the kinds of values an array may hold; ``sample`` makes each
VALUES = ("mixed", "negative", "zero", "tiny", "huge")
SCALED = ("tiny", "huge")  # cases of these kinds are compared relative to each output's size (code._tolerances)
# "tiny" and "huge" per dtype: far from 1, but a product of up to five of them (a variance's σ³, an Adam step's
# g²) neither underflows to 0 nor overflows to inf
TINY = {np.dtype(np.float64): 1e-60, np.dtype(np.float32): 1e-7}
HUGE = {np.dtype(np.float64): 1e60, np.dtype(np.float32): 1e6}
_SAID = {"mixed": "values of both signs", "negative": "negative values", "zero": "exact zeros among the values",
         "tiny": "tiny values", "huge": "huge values"}


@dataclass(frozen=True)
class Pick:
    """The entries of a domain's axes that one drawn case takes (None where the domain has no such axis)."""

    index: int
    rank: int | None = None
    dtype: np.dtype | None = None
    values: str | None = None
    exponent: float | None = None
    count: int | None = None
    threshold: float | None = None

    def said(self) -> str:
        """'4-D, float32, huge values': what this case was drawn as, for its label."""
        parts = []
        if self.rank is not None:
            parts.append(f"{self.rank}-D")
        if self.dtype is not None:
            parts.append(str(self.dtype))
        if self.values is not None:
            parts.append(_SAID.get(self.values, self.values))
        return ", ".join(parts)


@dataclass(frozen=True)
class Domain:
    draw: Callable  # draw(rng, pick) -> Case (kind DRAWN): one case's arguments, made from the pick
    ranks: tuple = ()  # the numbers of axes the arrays may have
    dtypes: tuple = ()  # the floating-point dtypes
    values: tuple = ()  # kinds of values (VALUES, or the exercise's own words, which its draw reads)
    exponents: tuple = ()
    counts: tuple = ()  # numbers that divide and must differ from case to case: tokens, rows, workers
    thresholds: tuple = ()  # numbers the inputs must cross
    keeps_dtype: tuple = ()  # the outputs (by name) that keep the inputs' floating-point dtype
    size: int = 0  # how many cases to draw: at least this many, and at least the longest axis's length
    notes: dict = field(default_factory=dict)  # value kind -> a note said when a function fails such a case

    def picks(self, rng: np.random.Generator) -> list[Pick]:
        """One Pick per case to draw: each axis's entries in an order the seed shuffles, repeated as needed."""
        axes = {name: tuple(getattr(self, name)) for name in AXES}
        count = max([self.size, 1, *(len(v) for v in axes.values())])
        orders = {name: [v[i] for i in rng.permutation(len(v))] for name, v in axes.items() if v}
        fields = {"ranks": "rank", "dtypes": "dtype", "values": "values", "exponents": "exponent",
                  "counts": "count", "thresholds": "threshold"}
        picks = []
        for i in range(count):
            chosen = {fields[name]: order[i % len(order)] for name, order in orders.items()}
            if "dtype" in chosen:
                chosen["dtype"] = np.dtype(chosen["dtype"])
            picks.append(Pick(i, **chosen))
        return picks

    def cases(self, key: str) -> list:
        """The cases drawn for exercise ``key``: the same on every call (the seed is the key's)."""
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        drawn = []
        for pick in self.picks(rng):
            case = self.draw(rng, pick)
            if not case.note and pick.values in self.notes:
                case.note = self.notes[pick.values]
            if case.scaled is None:  # the draw did not say
                case.scaled = pick.values in SCALED
            drawn.append(case)
        return drawn


def sample(rng: np.random.Generator, shape, kind: str = "mixed", dtype=np.float64) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` holding values of ``kind`` (VALUES): "mixed" standard normal, "negative"
    all below 0, "zero" with about half of its entries exactly 0 (and at least one), "tiny" and "huge" scaled to
    TINY and HUGE of the dtype, of both signs."""
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if kind == "negative":
        x = -(np.abs(x) + 0.1)
    elif kind == "zero":
        x = np.where(rng.random(shape) < 0.5, 0.0, x)
        if x.size:
            x.flat[rng.integers(x.size)] = 0.0
    elif kind == "tiny":
        x = x * TINY[dtype]
    elif kind == "huge":
        x = x * HUGE[dtype]
    elif kind != "mixed":
        raise ValueError(f"no kind of values called {kind!r}; the kinds are {', '.join(VALUES)}")
    return np.asarray(x).astype(dtype)


def scalar(rng: np.random.Generator, kind: str = "mixed", low: float = 0.1, high: float = 10.0) -> float:
    """A Python float of ``kind``: "mixed" of either sign between ``low`` and ``high`` in size, "negative" below 0,
    "zero" 0.0, "tiny" about 1e-100 and "huge" about 1e100 in size (of either sign)."""
    size = float(np.exp(rng.uniform(np.log(low), np.log(high))))
    sign = -1.0 if rng.random() < 0.5 else 1.0
    if kind == "negative":
        return -size
    if kind == "zero":
        return 0.0
    if kind == "tiny":
        return sign * size * 1e-100
    if kind == "huge":
        return sign * size * 1e100
    if kind != "mixed":
        raise ValueError(f"no kind of values called {kind!r}; the kinds are {', '.join(VALUES)}")
    return sign * size


def leading(rng: np.random.Generator, rank: int, last: tuple = (), low: int = 1, high: int = 4) -> tuple:
    """A shape of ``rank`` axes in all whose last axes are ``last``, the others drawn from ``low`` to ``high``."""
    return tuple(int(n) for n in rng.integers(low, high + 1, max(0, rank - len(last)))) + tuple(last)
