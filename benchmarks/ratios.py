"""A benchmark's ratios, their noise, and the targets they are held to (benchmarks/targets.toml).

A ratio is haaw's time over another engine's, both measured in one run. Where the two took turns step by
step, it is the median of the per-turn ratios: a slow spell of a shared machine slows both halves of a
turn, and the ratio of that turn hardly moves. Where each engine ran in a block of its own (torch, whose
threads would slow the next engine down; the garbage collector's runs, which would land in the other
engine's steps), it is the ratio of the two medians.

Its noise is what the run itself says about how far the median could be off: the half-width of the 95%
confidence interval of a median that a box plot's notch draws, 1.57 × IQR / √n (McGill, Tukey and Larsen,
1978), of the per-turn ratios; for a ratio of two medians, the two relative half-widths added in
quadrature. A ratio fails its target only when it is above the target by more than its noise: a run on a
busy machine measures a wider interval, not a slower engine.
"""
from __future__ import annotations

import math
import statistics
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

TARGETS = Path(__file__).with_name("targets.toml")
# What every benchmark reads its times from: wall time, or CPU time (the scripts' --cpu-time, the guard's
# --benchmark-timer=time.process_time), which other jobs on a shared machine do not stretch.
clock = time.perf_counter


def now() -> float:
    return clock()


def use_clock(timer) -> None:
    """Read every time of the run from ``timer`` (``time.process_time`` for CPU time)."""
    global clock
    clock = timer


@dataclass(frozen=True)
class Ratio:
    name: str
    value: float  # haaw's time over the other engine's
    noise: float  # half-width of the value's 95% confidence interval, from the spread of this run
    target: float = math.nan  # the most the value may be (targets.toml)

    @property
    def fails(self) -> bool:
        """Above its target by more than its noise."""
        return self.value - self.noise > self.target

    def __str__(self) -> str:
        verdict = "FAIL" if self.fails else "ok"
        return f"{self.name:<28}{self.value:>6.2f} ± {self.noise:.2f}   target at most {self.target:.2f}   {verdict}"


def alternate(target, setup=None, rounds=1, warmup_rounds=0):
    """pytest-benchmark's ``benchmark.pedantic`` without pytest: ``setup()`` then ``target()``, ``warmup_rounds``
    and then ``rounds`` times. A benchmark times the other engine in ``setup`` and haaw in ``target``, so the two
    take turns; the guard (benchmarks/test_targets.py) passes the real ``pedantic``, which also times ``target``
    and keeps the history of those times."""
    for _ in range(warmup_rounds + rounds):
        if setup is not None:
            setup()
        target()


def notch(samples) -> float:
    """The half-width of a median's 95% confidence interval, 1.57 × IQR / √n."""
    samples = list(samples)
    if len(samples) < 4:
        raise ValueError(f"the noise of a median needs at least 4 samples, got {len(samples)}")
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return 1.57 * (q3 - q1) / math.sqrt(len(samples))


def paired(name: str, ours, theirs) -> Ratio:
    """Turns taken step by step: the median of ours[i] / theirs[i], and its notch."""
    per_turn = [a / b for a, b in zip(ours, theirs, strict=True)]
    return Ratio(name, statistics.median(per_turn), notch(per_turn))


def of_medians(name: str, ours, theirs) -> Ratio:
    """Blocks of their own: median(ours) / median(theirs), its noise the two medians' relative notches in
    quadrature."""
    a, b = statistics.median(ours), statistics.median(theirs)
    value = a / b
    return Ratio(name, value, value * math.hypot(notch(ours) / a, notch(theirs) / b))


def targets(benchmark: str, path: Path = TARGETS) -> dict[str, float]:
    """The targets of one benchmark (a table of targets.toml): ratio name -> the most it may be."""
    return tomllib.loads(path.read_text())[benchmark]


def judged(benchmark: str, ratios, path: Path = TARGETS, every: bool = True) -> list[Ratio]:
    """``ratios`` with their targets. A ratio without a target is an error, and so, with ``every``, is a target that
    was not measured: a renamed ratio, or a reference engine not installed, would otherwise go unguarded."""
    wanted = targets(benchmark, path)
    ratios = list(ratios)
    measured = {r.name for r in ratios}
    if measured - wanted.keys() or (every and wanted.keys() - measured):
        raise KeyError(f"{benchmark}: ratios measured {sorted(measured)}, targets in {path.name} "
                       f"{sorted(wanted)}: each ratio needs one target, and each target a ratio")
    return [Ratio(r.name, r.value, r.noise, float(wanted[r.name])) for r in ratios]
