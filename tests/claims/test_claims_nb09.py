"""The claims of notebook 09: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest


def test_09_accumulating_k_microbatches_of_loss_over_k_equals_one_big_batch():
    from haaw.course.nb09 import initial_weights, make_data, model_with, summed_loss

    x, y = make_data(64)
    weights = initial_weights()
    big = model_with(weights)
    (summed_loss(big, x, y) / 64).backward()
    accumulated = model_with(weights)
    for rows in np.array_split(np.arange(64), 4):
        (summed_loss(accumulated, x[rows], y[rows]) / 16 / 4).backward()
    for a, b in zip(accumulated.parameters(), big.parameters()):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-12, atol=1e-15)


def test_09_averaging_over_workers_equals_the_big_batch_simulated_and_real():
    from haaw.course.nb09 import all_reduce_with_torch, ring_all_reduce, ring_bytes_per_worker
    from haaw.course.nb09 import initial_weights, make_data, shard_gradient

    x, y = make_data(64)
    weights = initial_weights()
    big = np.concatenate([g.ravel() for g in shard_gradient(weights, x, y)])
    local = [np.concatenate([g.ravel() for g in shard_gradient(weights, x[s], y[s])])
             for s in np.array_split(np.arange(64), 4)]
    summed, sent = ring_all_reduce(local)
    for worker in summed:
        np.testing.assert_allclose(worker / 4, big, rtol=1e-12, atol=1e-15)
    assert sent == ring_bytes_per_worker(4, big.nbytes)
    pytest.importorskip("torch")
    per_process = all_reduce_with_torch([(x[:32], y[:32]), (x[32:], y[32:])], weights)
    for grads in per_process:
        np.testing.assert_allclose(np.concatenate([g.ravel() for g in grads]), big, rtol=1e-12, atol=1e-15)
