"""One training step of a scalar MLP, timed with haaw.Value and with micrograd's engine.

Both engines train MLP(2, [16, 16, 1]) on the same 64 half-moon points from the same
initial weights: forward, SVM hinge loss plus an L2 term, backward, SGD, zero grads.
Timed twice: with the garbage collector on, as in a notebook, where a graph that holds reference
cycles (micrograd's closures) is freed by the collector and that time is part of a step; and with
it off, which measures the engines' own work alone.

    python benchmarks/scalar_step.py [--reps N] [--quick]
"""
from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time

import numpy as np

from haaw import Value
from haaw.course.nb02 import MLP  # the same network notebook 02 trains, built from Values

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


def time_steps(steps: dict, warmup: int, reps: int, collector: bool) -> dict:
    """Per engine: the median seconds per step, the median seconds of its backward pass alone, and
    the share of step time spent in the garbage collector.

    With the collector off, the engines take turns step by step, so that a slow spell of the machine
    hits both alike, and the collector runs between steps, untimed, to free what reference cycles
    left behind. With it on, each engine runs its steps in a block of its own, starting from a clean
    heap: taking turns would make one engine's collections land in the other's steps.
    """
    stamps = []

    def on_gc(phase, info):  # the collector calls this as each collection starts and stops
        stamps.append(time.perf_counter())

    times = {name: [] for name in steps}
    backward = {name: [] for name in steps}
    gc_time = {name: 0.0 for name in steps}

    def run(name):
        stamps.clear()
        t0 = time.perf_counter()
        backward[name].append(steps[name]())
        times[name].append(time.perf_counter() - t0)
        gc_time[name] += sum(stamps[1::2]) - sum(stamps[0::2])

    gc.callbacks.append(on_gc)
    try:
        if collector:
            for name, step in steps.items():
                gc.collect()
                gc.enable()
                for _ in range(warmup):
                    step()
                for _ in range(reps):
                    run(name)
        else:
            for _ in range(warmup):
                for step in steps.values():
                    step()
            gc.collect()
            gc.disable()
            for _ in range(reps):
                for name in steps:
                    run(name)
                    gc.collect()
    finally:
        gc.callbacks.remove(on_gc)
        gc.enable()
    return {name: (statistics.median(times[name]), statistics.median(backward[name]),
                   gc_time[name] / sum(times[name])) for name in steps}


def timed_step(model, make_value, points, labels):
    """A training step that returns how long its backward pass took."""
    loss = loss_of(model, make_value, points, labels)
    t0 = time.perf_counter()
    loss.backward()
    seconds = time.perf_counter() - t0
    for p in model.parameters():
        p.data -= LR * p.grad
        p.grad = 0.0
    return seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=21, help="timed steps per engine")
    parser.add_argument("--quick", action="store_true", help="1 rep, no warm-up, 16 points (a smoke test)")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error(f"--reps must be at least 1, got {args.reps}")
    warmup, reps = (0, 1) if args.quick else (3, args.reps)
    n_points = 16 if args.quick else N_POINTS

    points, labels = half_moons(n_points)
    ours = MLP(SIZES, seed=1, activation="relu")  # micrograd's hidden units are ReLU
    engines = {"haaw": (ours, Value)}
    if MicroMLP is not None:  # same structure, then our initial weights copied in
        theirs = MicroMLP(SIZES[0], SIZES[1:])
        for p, q in zip(theirs.parameters(), ours.parameters(), strict=True):
            p.data = q.data
        engines["micrograd"] = (theirs, MicroValue)

    print(f"Python {platform.python_version()}, MLP({SIZES[0]}, {SIZES[1:]}), "
          f"{len(ours.parameters())} parameters, {n_points} points, "
          f"{reps} reps after {warmup} warm-up")
    first = {name: train_step(m, v, points, labels) for name, (m, v) in engines.items()}
    if "micrograd" in first:
        diff = abs(first["haaw"] - first["micrograd"])
        if diff > 1e-9:
            raise RuntimeError(f"first-step losses differ by {diff:.3g}: {first}")
        print(f"first-step losses agree: {first['haaw']:.12f} (|difference| = {diff:.1e})")
    else:
        print("micrograd is not installed: the comparison is skipped, haaw is timed alone")

    steps = {name: (lambda m=m, v=v: timed_step(m, v, points, labels)) for name, (m, v) in engines.items()}
    print(f"{'collector':<10}{'engine':<11}{'ms/step':>9}{'backward ms':>13}{'gc share':>10}")
    ratios = {}
    for collector in (True, False):
        result = time_steps(steps, warmup, reps, collector)
        for name, (step_s, backward_s, gc_share) in result.items():
            print(f"{'on' if collector else 'off':<10}{name:<11}{1e3 * step_s:>9.1f}{1e3 * backward_s:>13.1f}"
                  f"{gc_share:>10.0%}")
        if "micrograd" in result:
            ratios[collector] = result["micrograd"][0] / result["haaw"][0]
    if ratios:
        print(f"micrograd/haaw per step: {ratios[True]:.2f}x with the collector on (target: at least 4x), "
              f"{ratios[False]:.2f}x with it off (target: at least 1x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
