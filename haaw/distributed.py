"""Many workers, one update: gradient averaging simulated in NumPy, then done for real.

Data parallelism gives each worker a shard of the batch and a copy of the weights. Each computes
its own gradient; an all-reduce sums (then averages) them so that every worker holds the same
gradient, the one the whole batch would have given, and takes the same step, so the copies stay
identical. The ring all-reduce does it by passing chunks around a ring: each worker sends
2·(N−1)/N times the gradient's size, however many workers there are.
"""
from __future__ import annotations

import os
import socket
import tempfile

import numpy as np


def ring_all_reduce(buffers: list[np.ndarray]) -> tuple[list[np.ndarray], float]:
    """Sum ``buffers`` (one per worker) the way a ring does; return the results and the bytes a
    worker sent, on average. Reduce-scatter (N−1 steps), then all-gather (N−1 steps), one chunk
    per worker per step."""
    n = len(buffers)
    chunks = [np.array_split(b.astype(np.float64).ravel(), n) for b in buffers]
    sent = 0
    for step in range(n - 1):  # reduce-scatter: after it, worker i owns the full sum of chunk i+1
        outgoing = [chunks[i][(i - step) % n].copy() for i in range(n)]
        sent += sum(o.nbytes for o in outgoing)
        for i in range(n):
            chunks[(i + 1) % n][(i - step) % n] += outgoing[i]
    for step in range(n - 1):  # all-gather: pass the finished chunks around
        outgoing = [chunks[i][(i + 1 - step) % n].copy() for i in range(n)]
        sent += sum(o.nbytes for o in outgoing)
        for i in range(n):
            chunks[(i + 1) % n][(i + 1 - step) % n] = outgoing[i]
    results = [np.concatenate(c).reshape(buffers[0].shape) for c in chunks]
    return results, sent / n


def ring_bytes_per_worker(workers: int, nbytes: float) -> float:
    """What the formula says each worker sends in a ring all-reduce of ``nbytes``."""
    return 2 * (workers - 1) / workers * nbytes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, shards: list, weights: list, out_dir: str) -> None:
    """One process: its shard's gradient with haaw, then a real all-reduce with torch.distributed (gloo)."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    from .toy_regression import shard_gradient

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
    loopback, and return every worker's averaged gradient (so they can be compared)."""
    import torch.multiprocessing as mp

    world = len(shards)
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(_worker, args=(world, _free_port(), shards, weights, out_dir), nprocs=world,
                           join=True, start_method="spawn")
        results = []
        for rank in range(world):
            with np.load(os.path.join(out_dir, f"rank{rank}.npz")) as saved:
                results.append([saved[f"arr_{i}"] for i in range(len(saved.files))])
    return results
