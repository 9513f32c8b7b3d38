"""One training step of a scalar MLP, timed with haaw.Value and with micrograd's engine.

Both engines train MLP(2, [16, 16, 1]) on the same 64 half-moon points from the same
initial weights: forward, SVM hinge loss plus an L2 term, backward, SGD, zero grads.
Timed twice: with the garbage collector on, as in a notebook, where a graph that holds reference
cycles (micrograd's closures) is freed by the collector and that time is part of a step; and with
it off, which measures the engines' own work alone. The ratios, haaw's time over micrograd's, are
held to benchmarks/targets.toml (benchmarks/ratios.py says how; `pytest benchmarks` is the guard).

    python benchmarks/scalar_step.py [--reps N] [--quick]
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time

import numpy as np
from ratios import alternate, judged, now, of_medians, paired, use_clock  # benchmarks/ratios.py, beside this file

from haaw import Value
from haaw.course.nb02 import MLP  # the same network notebook 02 trains, built from Values
from haaw.engine.autograd import topological_order

try:
    from micrograd.engine import Value as MicroValue
    from micrograd.nn import MLP as MicroMLP
except ImportError:
    MicroValue = MicroMLP = None

SIZES = [2, 16, 16, 1]
N_POINTS, ALPHA, LR = 64, 1e-4, 0.05


def half_moons(n, seed=0):
    """Two interleaved half-circles with a little noise, labels +1 and -1, as Python floats."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = np.arange(n) % 2 == 0
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    points = np.stack([x, y], axis=1) + rng.normal(0, 0.1, (n, 2))
    return points.tolist(), np.where(upper, 1.0, -1.0).tolist()


def loss_of(model, make_value, points, labels):
    """mean(relu(1 - y * score)) + ALPHA * sum(p * p): the same expression for both engines."""
    scores = [model([make_value(a), make_value(b)]) for a, b in points]
    hinge = [(1 - y * s).relu() for y, s in zip(labels, scores)]
    data_loss = sum(hinge) * (1.0 / len(hinge))
    return data_loss + ALPHA * sum(p * p for p in model.parameters())


def train_step(model, make_value, points, labels):
    loss = loss_of(model, make_value, points, labels)
    loss.backward()
    for p in model.parameters():
        p.data -= LR * p.grad
        p.grad = 0.0
    return loss.data


def timed_step(model, make_value, points, labels):
    """A training step that returns how long its backward pass took."""
    loss = loss_of(model, make_value, points, labels)
    t0 = now()
    loss.backward()
    seconds = now() - t0
    for p in model.parameters():
        p.data -= LR * p.grad
        p.grad = 0.0
    return seconds


def node_count(root) -> int:
    """The nodes of a graph, of either engine (micrograd keeps a node's inputs in ``_prev``)."""
    if isinstance(root, Value):
        return len(topological_order(root))
    seen, stack = {root}, [root]
    while stack:
        for parent in stack.pop()._prev:
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return len(seen)


class Turns:
    """One engine's steps: seconds a step, seconds of its backward, seconds in the collector."""

    def __init__(self, step):
        self.step, self.times, self.backward, self.in_collector = step, [], [], 0.0

    def __call__(self):
        stamps = []

        def on_gc(phase, info):  # the collector calls this as each collection starts and stops
            stamps.append(now())

        gc.callbacks.append(on_gc)
        try:
            t0 = now()
            self.backward.append(self.step())
            self.times.append(now() - t0)
        finally:
            gc.callbacks.remove(on_gc)
        self.in_collector += sum(stamps[1::2]) - sum(stamps[0::2])

    def last(self, n):
        """The last ``n`` steps (the warm-up left out): (step seconds, backward seconds, share in the collector)."""
        return self.times[-n:], self.backward[-n:], self.in_collector / sum(self.times)


def collector_off(steps: dict, reps: int, warmup: int, pedantic=alternate) -> dict:
    """With the collector off, haaw and micrograd take turns step by step (micrograd in ``pedantic``'s setup), so
    that a slow spell of the machine hits both alike; the collector runs between steps, untimed, to free what
    reference cycles left behind. Per engine: ``Turns.last(reps)``."""
    turns = {name: Turns(step) for name, step in steps.items()}

    def micrograd_s_turn():
        gc.collect()
        turns["micrograd"]()
        gc.collect()

    gc.collect()
    gc.disable()
    try:
        pedantic(turns["haaw"], setup=micrograd_s_turn if "micrograd" in turns else gc.collect,
                 rounds=reps, warmup_rounds=warmup)
    finally:
        gc.enable()
    return {name: t.last(reps) for name, t in turns.items()}


def collector_on(steps: dict, reps: int, warmup: int, pedantic=alternate) -> dict:
    """With the collector on, each engine runs its steps in a block of its own, from a clean heap: taking turns
    would make one engine's collections land in the other's steps. micrograd first, then haaw in ``pedantic``.
    The objects the process held before are frozen (``gc.freeze``), out of every collection: a full collection
    scans them all, so under pytest, or after an import of torch, both engines' steps took longer by an amount
    that depended on the process, not on the engine (haaw's step 70 ms alone, 144 ms after importing torch)."""
    turns = {name: Turns(step) for name, step in steps.items()}
    gc.collect()
    gc.freeze()  # what the process held before (pytest's objects, torch's) is left out of every collection
    try:
        gc.enable()
        if "micrograd" in turns:
            alternate(turns["micrograd"], rounds=reps, warmup_rounds=warmup)
            gc.collect()
        pedantic(turns["haaw"], rounds=reps, warmup_rounds=warmup)
    finally:
        gc.unfreeze()
    return {name: t.last(reps) for name, t in turns.items()}


def ratios(off: dict | None, on: dict | None, nodes: dict) -> list:
    """haaw's over micrograd's, from what ``collector_off`` and ``collector_on`` measured (either may be None):
    step time with the collector off (turn by turn), backward time per node of the graph (turn by turn), and
    step time with the collector on (block by block)."""
    found = []
    if off is not None:
        (ours, ours_backward, _), (theirs, theirs_backward, _) = off["haaw"], off["micrograd"]
        found += [paired("step, collector off", ours, theirs),
                  paired("backward per node", [b / nodes["haaw"] for b in ours_backward],
                         [b / nodes["micrograd"] for b in theirs_backward])]
    if on is not None:
        found.append(of_medians("step, collector on", on["haaw"][0], on["micrograd"][0]))
    return found


def engines(n_points: int):
    """The two models, from the same initial weights, and the points: {name: (model, Value class)}, points, labels."""
    points, labels = half_moons(n_points)
    ours = MLP(SIZES, seed=1, activation="relu")  # micrograd's hidden units are ReLU
    found = {"haaw": (ours, Value)}
    if MicroMLP is not None:  # same structure, then our initial weights copied in
        theirs = MicroMLP(SIZES[0], SIZES[1:])
        for p, q in zip(theirs.parameters(), ours.parameters(), strict=True):
            p.data = q.data
        found["micrograd"] = (theirs, MicroValue)
    return found, points, labels


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=21, help="timed steps per engine")
    parser.add_argument("--quick", action="store_true", help="4 reps, no warm-up, 16 points (a smoke test)")
    parser.add_argument("--cpu-time", action="store_true", help="time in CPU time, which other jobs do not stretch")
    args = parser.parse_args(argv)
    if args.cpu_time:
        use_clock(time.process_time)
    if args.reps < 4:
        parser.error(f"--reps must be at least 4 (the noise of a median needs them), got {args.reps}")
    warmup, reps = (0, 4) if args.quick else (3, args.reps)
    n_points = 16 if args.quick else N_POINTS

    found, points, labels = engines(n_points)
    nodes = {name: node_count(loss_of(m, v, points, labels)) for name, (m, v) in found.items()}
    print(f"Python {platform.python_version()}, MLP({SIZES[0]}, {SIZES[1:]}), "
          f"{len(found['haaw'][0].parameters())} parameters, {n_points} points, "
          f"{reps} reps after {warmup} warm-up, {'CPU' if args.cpu_time else 'wall'} time; graph nodes: "
          + ", ".join(f"{name} {n:,}" for name, n in nodes.items()))
    first = {name: train_step(m, v, points, labels) for name, (m, v) in found.items()}
    if "micrograd" in first:
        diff = abs(first["haaw"] - first["micrograd"])
        if diff > 1e-9:
            raise RuntimeError(f"first-step losses differ by {diff:.3g}: {first}")
        print(f"first-step losses agree: {first['haaw']:.12f} (|difference| = {diff:.1e})")
    else:
        print("micrograd is not installed: the comparison is skipped, haaw is timed alone")

    steps = {name: (lambda m=m, v=v: timed_step(m, v, points, labels)) for name, (m, v) in found.items()}
    on = collector_on(steps, reps, warmup)
    off = collector_off(steps, reps, warmup)
    print(f"{'collector':<10}{'engine':<11}{'ms/step':>9}{'backward ms':>13}{'gc share':>10}")
    for collector, result in (("on", on), ("off", off)):
        for name, (times, backward, gc_share) in result.items():
            print(f"{collector:<10}{name:<11}{1e3 * statistics.median(times):>9.1f}"
                  f"{1e3 * statistics.median(backward):>13.1f}{gc_share:>10.0%}")
    if "micrograd" in found:
        print("haaw/micrograd, median ± noise (benchmarks/ratios.py), against benchmarks/targets.toml:")
        for ratio in judged("scalar_step", ratios(off, on, nodes)):
            print(f"  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
