"""One training step of a 784-256-10 MLP, batch 256: haaw vs hand-written NumPy vs torch.

The hand-written NumPy step does the same matmuls with no graph at all: it is the limit a
NumPy-based engine can reach, so haaw / NumPy is the engine's own overhead. NumPy's BLAS and torch
run on ``--threads`` threads (1 by default: on a small shared machine, two BLAS threads make the
times of both engines jump around far more than the engine's overhead, which is what is measured). A step is: forward, cross-entropy, backward,
SGD update. Medians of repeated steps, float32 and float64, and the ratios haaw/numpy and haaw/torch against
benchmarks/targets.toml (benchmarks/ratios.py says how; `pytest benchmarks` is the guard); then the scalar
section (benchmarks/scalar_step.py: haaw.Value vs micrograd, garbage collector on and off).

    python benchmarks/mlp_step.py [--reps N] [--quick] [--tensor-only]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from ratios import alternate, judged, now, of_medians, paired, use_clock  # benchmarks/ratios.py, beside this file

import haaw.nn.functional as F
from haaw.nn import MLP
from haaw.optim import SGD
from haaw.engine import Tensor

BATCH, SIZES, LR = 256, (784, 256, 10), 0.1


def data(dtype):
    rng = np.random.default_rng(0)
    return rng.standard_normal((BATCH, SIZES[0])).astype(dtype), rng.integers(0, SIZES[-1], BATCH)


def haaw_step(dtype):
    x, y = data(dtype)
    model = MLP(SIZES, seed=0, dtype=dtype)
    opt = SGD(model.parameters(), lr=LR)
    x = Tensor(x)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step, [p.data.copy() for p in model.parameters()]


def numpy_step(dtype, weights):
    x, y = data(dtype)
    w1, b1, w2, b2 = [w.copy() for w in weights]
    rows = np.arange(BATCH)

    def step():
        h = x @ w1 + b1
        a = np.maximum(h, 0)
        logits = a @ w2 + b2
        shifted = logits - logits.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        loss = -logp[rows, y].mean()
        d_logits = np.exp(logp)
        d_logits[rows, y] -= 1
        d_logits /= BATCH
        d_w2, d_b2 = a.T @ d_logits, d_logits.sum(axis=0)
        d_h = (d_logits @ w2.T) * (h > 0)
        d_w1, d_b1 = x.T @ d_h, d_h.sum(axis=0)  # no gradient for x: it is the data
        for p, g in ((w1, d_w1), (b1, d_b1), (w2, d_w2), (b2, d_b2)):
            p -= LR * g
        return float(loss)
    return step


def torch_step(dtype, weights, torch):
    x, y = data(dtype)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    params = [torch.tensor(w, requires_grad=True) for w in weights]

    def step():
        for p in params:
            p.grad = None
        h = torch.relu(x @ params[0] + params[1])
        loss = torch.nn.functional.cross_entropy(h @ params[2] + params[3], y)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= LR * p.grad
        return loss.item()
    return step


def take_turns(steps: dict, reps: int, warmup: int, pedantic=alternate) -> dict:
    """Seconds a step of each engine: haaw and numpy take turns step by step (numpy in ``pedantic``'s setup), so
    that a slow spell of the machine hits both alike. torch runs in a block of its own afterwards: its threads keep
    spinning after each operation and would slow the next engine down."""
    times = {name: [] for name in steps}

    def turn(name):
        def run():
            start = now()
            steps[name]()
            times[name].append(now() - start)
        return run

    pedantic(turn("haaw"), setup=turn("numpy"), rounds=reps, warmup_rounds=warmup)
    if "torch" in steps:
        alternate(turn("torch"), rounds=reps, warmup_rounds=warmup)
    return {name: t[-reps:] for name, t in times.items()}


def engines(dtype, torch=None) -> dict:
    """Each engine's step, from the same weights; raises if their first losses disagree."""
    ours, weights = haaw_step(dtype)
    steps = {"haaw": ours, "numpy": numpy_step(dtype, weights)}
    if torch is not None:
        steps["torch"] = torch_step(dtype, weights, torch)
    first = {name: step() for name, step in steps.items()}  # all start from the same weights
    tol = 1e-4 if dtype == np.float32 else 1e-10
    if max(first.values()) - min(first.values()) > tol * max(first.values()):
        raise RuntimeError(f"the engines disagree on the first loss: {first}")
    return steps


def ratios(dtype, times: dict) -> list:
    """haaw/numpy (turn by turn) and haaw/torch (block by block)."""
    name = np.dtype(dtype).name
    found = [paired(f"haaw/numpy {name}", times["haaw"], times["numpy"])]
    if "torch" in times:
        found.append(of_medians(f"haaw/torch {name}", times["haaw"], times["torch"]))
    return found


def one_thread(threads: int = 1):
    """NumPy's BLAS and torch on ``threads`` threads; torch, or None where it is not installed."""
    try:
        import torch
    except ImportError:
        torch = None
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)  # NumPy's BLAS
    if torch is not None:
        torch.set_num_threads(threads)
    return torch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="4 reps, no warm-up (a smoke test)")
    parser.add_argument("--tensor-only", action="store_true", help="leave out the scalar section")
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads (default 1)")
    parser.add_argument("--cpu-time", action="store_true", help="time in CPU time, which other jobs do not stretch")
    parser.add_argument("--write", type=Path, help="also write what is printed to this page (docs/results/benchmarks.md)")
    args = parser.parse_args(argv)
    if args.write:  # the same run in a fresh process, its output printed and written as a docs page
        argv = [a for a in (sys.argv[1:] if argv is None else argv)]
        i = argv.index("--write")
        rest = argv[:i] + argv[i + 2:]
        run = subprocess.run([sys.executable, __file__, *rest], capture_output=True, text=True)
        print(run.stdout, end="")
        command = " ".join(["python benchmarks/mlp_step.py", *rest])
        args.write.write_text(f"# Benchmarks: the last run\n\nWritten by `{command} --write {args.write}` on the "
                              f"2-core machine the course is developed on ({platform.machine()}); "
                              f"docs/performance.md says what each table measures.\n\n```text\n{run.stdout}```\n")
        return run.returncode
    reps, warmup = (4, 0) if args.quick else (args.reps, 5)
    if args.cpu_time:
        use_clock(time.process_time)
    threads = args.threads
    torch = one_thread(threads)
    print(f"Python {platform.python_version()}, numpy {np.__version__}"
          + (f", torch {torch.__version__} ({threads} threads)" if torch else ", torch not installed")
          + f", BLAS {threads} thread(s); MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, median of {reps} steps, "
          + ("CPU" if args.cpu_time else "wall") + " time")
    print(f"{'dtype':<9}{'haaw ms':>9}{'numpy ms':>10}{'torch ms':>10}")
    found = []
    for dtype in (np.float32, np.float64):
        times = take_turns(engines(dtype, torch), reps, warmup)
        ms = {name: 1e3 * statistics.median(t) for name, t in times.items()}
        print(f"{np.dtype(dtype).name:<9}{ms['haaw']:>9.2f}{ms['numpy']:>10.2f}{ms.get('torch', float('nan')):>10.2f}")
        found += ratios(dtype, times)
    print("median ± noise (benchmarks/ratios.py), against benchmarks/targets.toml:")
    for ratio in judged("mlp_step", found, every=False):
        print(f"  {ratio}")
    if args.tensor_only:
        return 0
    print(flush=True)
    # a fresh process: torch, imported above, leaves many objects for the garbage collector to scan
    scalar = ([sys.executable, str(Path(__file__).with_name("scalar_step.py"))] + (["--quick"] if args.quick else [])
              + (["--cpu-time"] if args.cpu_time else []))
    return subprocess.run(scalar, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
