"""Notebook 09's props: many workers, one update, simulated in NumPy and then done for real.

Data parallelism gives each worker a shard of the batch and a copy of the weights. Each computes
its own gradient; an all-reduce sums (then averages) them so that every worker holds the same
gradient, the one the whole batch would have given, and takes the same step, so the copies stay
identical. The ring all-reduce does it by passing chunks around a ring: each worker sends
2·(N−1)/N times the gradient's size, however many workers there are.

Worker processes are started fresh, so what they run must be importable: ``shard_gradient``
rebuilds the small model from plain arrays and returns plain arrays.
"""
from __future__ import annotations

import os
import socket
import tempfile
import time

from pathlib import Path

import numpy as np

from ..engine import Tensor
from ..engine.guard import refusable

from ..nn import MLP

_COURSE = str(Path(__file__).resolve().parent)  # the course's own wrong versions may call what it refuses


def make_data(n: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    y = np.sin(x @ np.array([1.0, -2.0, 0.5]))[:, None]
    return x, y


def initial_weights(seed: int = 0) -> list:
    return [p.data.copy() for p in MLP([3, 16, 1], activation="tanh", seed=seed).parameters()]


def model_with(weights) -> MLP:
    model = MLP([3, 16, 1], activation="tanh")
    for p, w in zip(model.parameters(), weights):
        p.data = np.array(w, dtype=np.float64)
    return model


def summed_loss(model, x, y):
    """Sum of squared errors: a sum, so shards add up; divide by the example count to average."""
    err = model(Tensor(x)) - Tensor(y)
    return (err * err).sum()


def flat(arrays) -> np.ndarray:
    """Arrays (a model's gradients, say) laid end to end in one vector: the one buffer an all-reduce sends."""
    return np.concatenate([np.ravel(a) for a in arrays])


def set_grads(model, vector) -> None:
    """Cut a flat gradient back into one piece per parameter, into ``.grad``, where the optimizer reads it."""
    sizes = np.cumsum([p.data.size for p in model.parameters()])[:-1]
    for p, piece in zip(model.parameters(), np.split(np.asarray(vector), sizes)):
        p.grad = piece.reshape(p.shape)


def gradient_spread(weights, x, y, batch: int, draws: int = 200, seed: int = 0) -> tuple[float, float]:
    """Section 6: the gradients of ``draws`` random batches of ``batch`` examples (the mean loss over each), against
    the whole data set's. (how far their average lies from it, relative; the root-mean-square distance of one
    batch's gradient from it, relative): the mean is unchanged, the noise shrinks as the batch grows."""
    rng = np.random.default_rng(seed)
    full = flat(shard_gradient(weights, x, y))
    grads = np.array([flat(shard_gradient(weights, x[rows], y[rows]))
                      for rows in (rng.choice(len(x), batch, replace=False) for _ in range(draws))])
    size = np.linalg.norm(full)
    return (float(np.linalg.norm(grads.mean(axis=0) - full) / size),
            float(np.sqrt(np.mean(np.sum((grads - full) ** 2, axis=1))) / size))


DIVERGED = 100  # section 6: a run has diverged once its loss passes this many times its start


def loss_after(weights, x, y, batch: int, lr: float, examples: int, seed: int = 0) -> float:
    """Section 6: plain SGD from ``weights`` on shuffled batches of ``batch`` examples (the mean loss of each) until
    ``examples`` examples have been seen; the mean loss over all of ``x`` then, or inf once it has grown past DIVERGED
    (100) times its start (diverged: the run stops there, before its numbers overflow)."""
    from ..optim import SGD

    model = model_with(weights)
    optimizer = SGD(model.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    start = summed_loss(model, x, y).item() / len(x)
    seen = 0
    while seen < examples:
        for rows in np.array_split(rng.permutation(len(x)), len(x) // batch):   # one epoch: every example once
            optimizer.zero_grad()
            loss = summed_loss(model, x[rows], y[rows]) / len(rows)
            if not loss.item() < DIVERGED * start:
                return float("inf")
            loss.backward()
            optimizer.step()
            seen += len(rows)
            if seen >= examples:
                break
    return summed_loss(model, x, y).item() / len(x)


def shard_gradient(weights, x, y, total: int | None = None) -> list:
    """Gradient of (sum of this shard's squared errors) / total, as plain arrays."""
    model = model_with(weights)
    loss = summed_loss(model, x, y) / float(total or len(x))
    loss.backward()
    return [p.grad.copy() for p in model.parameters()]


@refusable("course.ring_all_reduce", "the course's ring_all_reduce", except_from=_COURSE)
def ring_all_reduce(buffers: list[np.ndarray]) -> tuple[list[np.ndarray], float]:
    """Sum ``buffers`` (one per worker) the way a ring does; return the results and the bytes a
    worker sent, on average. Reduce-scatter (N−1 steps), then all-gather (N−1 steps), one chunk
    per worker per step, over a simulated ``Ring``."""
    wires = Ring(len(buffers))
    results = ring(buffers, wires)
    return [r.reshape(buffers[0].shape) for r in results], wires.bytes_sent / len(buffers)


@refusable("course.ring", "the course's ring", except_from=_COURSE)
def ring(buffers, send, *, steps=None, gather=True, average=False) -> list[np.ndarray]:
    """The ring all-reduce, written once: every worker ends with the sum of all N buffers, passed around one
    chunk per worker per step with ``received = send(outgoing)`` (worker i sends ``outgoing[i]`` to worker
    (i + 1) % N; ``received[i]`` comes from worker (i − 1) % N). It is also the reference of notebook 09's
    exercise, whose checker makes its named mistakes with the keyword arguments: ``steps(n)`` reduce-scatter
    steps instead of N − 1, no all-gather, or a division by N."""
    n = len(buffers)
    chunks = [np.array_split(np.array(b, dtype=np.float64).ravel(), n) for b in buffers]  # chunks[i][c]: a copy
    for step in range(n - 1 if steps is None else steps(n)):  # reduce-scatter: each chunk travels the ring once
        received = send([chunks[i][(i - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - 1 - step) % n] += received[i]  # the chunk the left neighbour sent, added to its own
    if gather:  # now worker i holds the finished sum of chunk (i + 1) % n: pass the finished chunks around
        _pass_finished_chunks(chunks, send)
    return [np.concatenate(c) / (n if average else 1) for c in chunks]


def _pass_finished_chunks(chunks, send) -> None:
    """The all-gather half of the ring, in place: worker i starts with the finished chunk (i + 1) % N in
    ``chunks[i]`` and, after N − 1 steps, holds every worker's finished chunk."""
    n = len(chunks)
    for step in range(n - 1):
        received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - step) % n] = received[i]  # replace: it is finished


class Ring:
    """The wires of a simulated ring of N workers, as a function: ``received = send(outgoing)``.

    One call is one step of the ring: every worker i sends ``outgoing[i]`` (one chunk) to its right-hand
    neighbour, worker (i + 1) % N, all at the same time; ``received[i]`` is the copy worker i got from
    worker (i − 1) % N. The ring counts its steps and the numbers and bytes that crossed it. Given the
    buffer ``length``, it refuses a message longer than one chunk of ``np.array_split``.
    """

    def __init__(self, workers: int, length: int | None = None):
        self.workers, self.length = workers, length
        self.steps, self.numbers_sent, self.bytes_sent = 0, 0, 0

    def __call__(self, outgoing):
        n = self.workers
        if not isinstance(outgoing, (list, tuple)) or len(outgoing) != n:
            raise ValueError(f"send takes a list of {n} chunks, one per worker (outgoing[i] goes from worker i to "
                             f"worker (i + 1) % {n}); got {type(outgoing).__name__}"
                             + (f" of length {len(outgoing)}" if isinstance(outgoing, (list, tuple)) else ""))
        messages = [np.array(o, dtype=np.float64).ravel() for o in outgoing]  # a copy: it crossed a wire
        if self.length is not None:
            largest = -(-self.length // n)  # the longest chunk np.array_split makes
            for i, m in enumerate(messages):
                if m.size > largest:
                    raise ValueError(f"in step {self.steps + 1} worker {i} sent {m.size} numbers, but one chunk of "
                                     f"a buffer of {self.length} split {n} ways holds at most {largest}: a ring "
                                     "sends one chunk per worker per step")
        self.steps += 1
        self.numbers_sent += sum(m.size for m in messages)
        self.bytes_sent += sum(m.nbytes for m in messages)
        return [messages[(i - 1) % n] for i in range(n)]


def ring_trace(workers: int = 3) -> str:
    """A ring all-reduce drawn as text: which workers' contributions each chunk holds after every step.

    Worker i cuts its buffer into chunks A, B, C, ...; "B12" is the sum of worker 1's and worker 2's copies of
    chunk B. Each step, every worker sends one chunk to its right-hand neighbour (the last worker's goes
    to worker 0): in reduce-scatter the receiver adds it to its own copy, in all-gather it replaces it.
    """
    n = workers
    names = [chr(ord("A") + c) for c in range(n)]
    held = [[{i} for _ in range(n)] for i in range(n)]  # held[i][c]: whose contributions worker i's chunk c sums

    def row(label):
        cells = ["  ".join(f"{names[c]}{''.join(map(str, sorted(held[i][c])))}".ljust(n + 1) for c in range(n))
                 for i in range(n)]
        return (f"{label:<18}" + "   ".join(cells)).rstrip()

    width = n * (n + 1) + 2 * (n - 1)
    lines = [(" " * 18 + "   ".join(f"worker {i}".ljust(width) for i in range(n))).rstrip(), row("start")]
    for step in range(n - 1):
        sent = [(i, (i - step) % n, set(held[i][(i - step) % n])) for i in range(n)]
        for i, c, contributions in sent:
            held[(i + 1) % n][c] |= contributions
        lines.append(row(f"reduce-scatter {step + 1}"))
    for step in range(n - 1):
        sent = [(i, (i + 1 - step) % n, set(held[i][(i + 1 - step) % n])) for i in range(n)]
        for i, c, contributions in sent:
            held[(i + 1) % n][c] = contributions
        lines.append(row(f"all-gather {step + 1}"))
    return "\n".join(lines)


def ring_bytes_per_worker(workers: int, nbytes: float) -> float:
    """What the formula says each worker sends in a ring all-reduce of ``nbytes``."""
    return 2 * (workers - 1) / workers * nbytes



def reduce_scatter(buffers, send) -> list:
    """The ring all-reduce's first half alone: afterwards worker i holds one chunk of ``np.array_split(buffer, N)``
    summed over all N workers, chunk (i + 1) % N. Returns (chunk index, summed chunk) for every worker."""
    n = len(buffers)
    partial = ring(buffers, send, gather=False)
    return [((i + 1) % n, np.array_split(partial[i], n)[(i + 1) % n]) for i in range(n)]


def all_gather(shards, send) -> list[np.ndarray]:
    """The ring all-reduce's second half alone: worker i starts with one chunk, ``shards[i] = (index, values)``,
    chunk (i + 1) % N as ``reduce_scatter`` leaves it, and passes what it last received to its right-hand
    neighbour, N − 1 times; every worker ends with every chunk, joined in index order."""
    n = len(shards)
    if [index for index, _ in shards] != [(i + 1) % n for i in range(n)]:
        raise ValueError(f"all_gather takes the chunks as reduce_scatter leaves them: worker i holds chunk (i + 1) % "
                         f"{n}; got indices {[index for index, _ in shards]}")
    chunks = [[None] * n for _ in range(n)]
    for i, (index, values) in enumerate(shards):
        chunks[i][index] = np.array(values)
    _pass_finished_chunks(chunks, send)
    return [np.concatenate(c) for c in chunks]


def overlap_timeline(backward_seconds, gradient_bytes, bucket_bytes: float, all_reduce_seconds) -> dict:
    """Backward with a bucketed all-reduce overlapping it, simulated (no clock: every time is computed).

    ``backward_seconds[i]`` and ``gradient_bytes[i]`` are layer i's backward time and gradient size, the layers in
    the order backward reaches them (the last layer first). When a layer's backward ends, its gradients join the
    open bucket; a bucket holding at least ``bucket_bytes`` is launched at once, and whatever is left is launched
    when backward ends. Communication runs on its own stream, one bucket at a time, in launch order: a bucket
    starts when it is launched or when the one before it has finished, whichever is later, and takes
    ``all_reduce_seconds(its bytes)``.

    Returns ``compute``: (start, end) of every layer's backward; ``buckets``: (launched, start, end, bytes) of every
    bucket; ``backward_end``; ``step_time``, when the last gradient is all-reduced; ``serial_time``, backward and
    then one all-reduce of the whole gradient."""
    clock, compute, buckets, waiting, stream_free = 0.0, [], [], 0.0, 0.0

    def launch(nbytes):
        start = max(clock, stream_free)
        end = start + all_reduce_seconds(nbytes)
        buckets.append((clock, start, end, nbytes))
        return end

    for seconds, nbytes in zip(backward_seconds, gradient_bytes):
        compute.append((clock, clock + seconds))
        clock += seconds
        waiting += nbytes
        if waiting >= bucket_bytes:
            stream_free, waiting = launch(waiting), 0.0
    if waiting:
        stream_free = launch(waiting)
    return {"compute": compute, "buckets": buckets, "backward_end": clock, "step_time": max(clock, stream_free),
            "serial_time": clock + all_reduce_seconds(sum(gradient_bytes))}


def draw_timelines(timeline: dict):
    """Two Gantt-style panels of one step, in milliseconds: backward then one all-reduce, and backward with the
    buckets' all-reduces overlapping it. Each panel has a compute row and a communication row."""
    import matplotlib.pyplot as plt

    from .style import PALETTE

    fig, axes = plt.subplots(2, 1, figsize=(7.5, 3.4), sharex=True)
    serial = [(timeline["backward_end"], timeline["serial_time"])]
    overlapped = [(start, end) for _, start, end, _ in timeline["buckets"]]
    for ax, title, communication in ((axes[0], "without overlap: backward, then one all-reduce", serial),
                                     (axes[1], "with overlap: each bucket's all-reduce as soon as it is full",
                                      overlapped)):
        for row, bars, colour in ((1, timeline["compute"], PALETTE[0]), (0, communication, PALETTE[1])):
            ax.broken_barh([(1000 * s, 1000 * (e - s)) for s, e in bars], (row - 0.35, 0.7),
                           facecolors=colour, edgecolors="white", linewidth=0.8)
        ax.set_yticks([0, 1], ["communication", "compute"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_title(title, loc="left")
    axes[1].set_xlabel("time in the step (ms)")
    fig.tight_layout()
    return fig

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, shards: list, weights: list, out_dir: str) -> None:
    """One process: its shard's gradient with haaw, then a real all-reduce with torch.distributed (gloo)."""
    loopback = next((name for _, name in socket.if_nameindex() if name.startswith("lo")), None)  # lo, lo0
    if loopback:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", loopback)
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        grads = [torch.from_numpy(g) for g in shard_gradient(weights, *shards[rank])]  # its shard's mean
        for g in grads:
            dist.all_reduce(g, op=dist.ReduceOp.SUM)  # every worker ends with the sum over all shards
            g /= world  # … and turns it into the average
        np.savez(os.path.join(out_dir, f"rank{rank}.npz"), *[g.numpy() for g in grads])
    finally:
        dist.destroy_process_group()


def all_reduce_with_torch(shards: list, weights: list, timeout: float = 120) -> list[list[np.ndarray]]:
    """Start one process per shard on this machine, all-reduce their gradients with gloo over
    loopback, and return every worker's averaged gradient (so they can be compared).

    Gives up after ``timeout`` seconds with a TimeoutError; on that, on an error or on an interrupt
    (the stop button), every worker is stopped before this returns."""
    import torch.multiprocessing as mp

    world = len(shards)
    with tempfile.TemporaryDirectory() as out_dir:
        workers = mp.start_processes(_worker, args=(world, _free_port(), shards, weights, out_dir), nprocs=world,
                                     join=False, start_method="spawn")
        deadline = time.monotonic() + timeout
        try:
            while not workers.join(timeout=max(0.0, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the {world} workers did not finish within {timeout:g} s")
        finally:
            for process in workers.processes:
                if process.is_alive():
                    process.terminate()
                process.join(5)
        results = []
        for rank in range(world):
            with np.load(os.path.join(out_dir, f"rank{rank}.npz")) as saved:
                results.append([saved[f"arr_{i}"] for i in range(len(saved.files))])
    return results


# --- pipeline parallelism: a simulated schedule (the companion) ----------------------------------------------
def pipeline_order(stages: int, micro: int, stage: int, kind: str) -> list[tuple[str, int]]:
    """The order in which ``stage`` (0 is the first) runs its work: ("F", j) is micro-batch j's forward, ("B", j)
    its backward. GPipe: every forward, then every backward. 1F1B: as many forwards as there are stages after this
    one (the warm-up), then one forward and one backward in turn, then the backwards that are left."""
    if kind == "gpipe":
        return [("F", j) for j in range(micro)] + [("B", j) for j in range(micro)]
    if kind != "1f1b":
        raise ValueError(f"pipeline_order: kind is 'gpipe' or '1f1b', not {kind!r}")
    warm = min(stages - 1 - stage, micro)
    order = [("F", j) for j in range(warm)]
    for j in range(micro - warm):
        order += [("F", warm + j), ("B", j)]
    return order + [("B", j) for j in range(micro - warm, micro)]


@refusable("nb09.pipeline_schedule", "the course's pipeline simulator, nb09.pipeline_schedule")
def pipeline_schedule(stages: int, micro: int, kind: str = "gpipe", forward: float = 1.0,
                      backward: float = 2.0) -> dict:
    """Run one step of a pipeline of ``stages`` workers on ``micro`` micro-batches, each stage in its order, each
    piece of work as soon as its stage is free and what it needs is done (a forward needs the previous stage's
    forward of the same micro-batch; a backward, the next stage's backward, or on the last stage its own forward).

    Returns the work as ``(stage, "F" or "B", micro-batch, start, end)``, the step's time, the bubble (the share of
    stages × time spent idle) and, per stage, the most micro-batches in flight: forward done, backward not yet."""
    orders = [pipeline_order(stages, micro, s, kind) for s in range(stages)]
    done, free, work = {}, [0.0] * stages, []
    position = [0] * stages
    while any(position[s] < len(orders[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            if position[s] == len(orders[s]):
                continue
            what, j = orders[s][position[s]]
            needs = (s - 1, "F", j) if what == "F" else ((s + 1, "B", j) if s < stages - 1 else (s, "F", j))
            if what == "F" and s == 0:
                needs = None
            if needs is not None and needs not in done:
                continue
            start = max(free[s], done[needs] if needs else 0.0)
            end = start + (forward if what == "F" else backward)
            done[(s, what, j)], free[s] = end, end
            work.append((s, what, j, start, end))
            position[s] += 1
            progressed = True
        if not progressed:
            raise RuntimeError("pipeline_schedule: the orders wait on each other")
    step = max(free)
    busy = micro * (forward + backward) * stages
    in_flight = []
    for order in orders:
        count = peak = 0
        for what, _ in order:
            count += 1 if what == "F" else -1
            peak = max(peak, count)
        in_flight.append(peak)
    return {"work": work, "step": step, "bubble": 1 - busy / (stages * step), "in_flight": in_flight}


def draw_pipelines(schedules: dict):
    """One Gantt panel per schedule: a row per stage, forwards light, backwards dark, each labelled with its
    micro-batch; the idle gaps are the bubble."""
    import matplotlib.pyplot as plt

    from .style import PALETTE

    fig, axes = plt.subplots(len(schedules), 1, figsize=(8, 1.1 + 0.55 * len(schedules) * 4), sharex=True)
    for ax, (title, plan) in zip(np.atleast_1d(axes), schedules.items()):
        stages = 1 + max(s for s, *_ in plan["work"])
        for s, what, j, start, end in plan["work"]:
            colour = PALETTE[0] if what == "F" else PALETTE[1]
            ax.broken_barh([(start, end - start)], (stages - 1 - s - 0.38, 0.76), facecolors=colour,
                           edgecolors="white", linewidth=0.8)
            ax.text((start + end) / 2, stages - 1 - s, str(j + 1), ha="center", va="center", fontsize=10,
                    color="white")
        ax.set_yticks(range(stages), [f"stage {stages - 1 - r}" for r in range(stages)])
        ax.set_title(f"{title}: bubble {plan['bubble']:.0%}, in flight on stage 0: {plan['in_flight'][0]}",
                     loc="left")
    from matplotlib.patches import Patch

    np.atleast_1d(axes)[0].legend(handles=[Patch(color=PALETTE[0], label="forward"),
                                           Patch(color=PALETTE[1], label="backward")], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=10)
    np.atleast_1d(axes)[-1].set_xlabel("time (one forward = 1, one backward = 2)")
    fig.tight_layout()
    return fig
