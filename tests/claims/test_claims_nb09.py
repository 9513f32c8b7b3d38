"""The claims of notebook 09: each figure or causal claim the notebook states, asserted."""
import re

import numpy as np
import pytest

from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.nb09 import ring_all_reduce as reference
from haaw.course.nb08 import gradient, make_model, masked_mean, padded_batch, token_losses
from haaw.course.nb09 import initial_weights, make_data, model_with, Ring, ring_bytes_per_worker, ring_trace, shard_gradient, summed_loss
from haaw.optim import SGD
from haaw.engine import guard


def test_09_accumulating_k_microbatches_of_loss_over_k_equals_one_big_batch():
    x, y = make_data(64)
    weights = initial_weights()
    big = model_with(weights)
    (summed_loss(big, x, y) / 64).backward()
    accumulated = model_with(weights)
    for rows in np.array_split(np.arange(64), 4):
        (summed_loss(accumulated, x[rows], y[rows]) / 16 / 4).backward()
    for a, b in zip(accumulated.parameters(), big.parameters()):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-12, atol=1e-15)


def test_09_averaging_over_workers_equals_the_big_batch_simulated_and_real(stored_output):
    from haaw.course.nb09 import ring_all_reduce, ring_bytes_per_worker

    x, y = make_data(64)
    weights = initial_weights()
    big = np.concatenate([g.ravel() for g in shard_gradient(weights, x, y)])
    local = [np.concatenate([g.ravel() for g in shard_gradient(weights, x[s], y[s])])
             for s in np.array_split(np.arange(64), 4)]
    summed, sent = ring_all_reduce(local)
    for worker in summed:
        np.testing.assert_allclose(worker / 4, big, rtol=1e-12, atol=1e-15)
    assert sent == ring_bytes_per_worker(4, big.nbytes)
    # real: two processes and a gloo all-reduce, as the notebook ran them (see the stored_output fixture; the
    # workers are not started a second time here): each process's gradient is the big batch's
    real = stored_output("09", "nb09.all_reduce_with_torch(").splitlines()
    assert [line.split()[:2] for line in real[:2]] == [["process", "0"], ["process", "1"]]
    assert all(re.fullmatch(r"process \d +agrees \(rtol 1e-07\)", line) for line in real[:2]), real
    assert real[2:] == ["both processes hold identical gradients: True"]


def _flat(arrays):
    return np.concatenate([a.ravel() for a in arrays])


def test_09_simulated_data_parallel_training_keeps_every_worker_equal_to_one_big_batch():
    from haaw.course.exercises.nb09 import ring_all_reduce

    x, y = make_data(64)
    weights = initial_weights()
    shards = np.array_split(np.arange(64), 4)
    replicas = [model_with(weights) for _ in shards]
    optimizers = [SGD(r.parameters(), lr=0.1) for r in replicas]
    single = model_with(weights)
    single_optimizer = SGD(single.parameters(), lr=0.1)
    for _ in range(20):
        local = []
        for replica, optimizer, rows in zip(replicas, optimizers, shards):
            optimizer.zero_grad()
            (summed_loss(replica, x[rows], y[rows]) / len(rows)).backward()
            local.append(_flat([p.grad for p in replica.parameters()]))
        for replica, optimizer, total in zip(replicas, optimizers, ring_all_reduce(local, Ring(4))):
            sizes = np.cumsum([p.data.size for p in replica.parameters()])[:-1]
            for p, piece in zip(replica.parameters(), np.split(total / 4, sizes)):
                p.grad = piece.reshape(p.shape)
            optimizer.step()
        single_optimizer.zero_grad()
        (summed_loss(single, x, y) / 64).backward()
        single_optimizer.step()
    final = [_flat([p.data for p in r.parameters()]) for r in replicas]
    for w in final[1:]:
        np.testing.assert_array_equal(w, final[0])  # the workers agree bit for bit
    start = _flat(weights)
    assert np.max(np.abs(final[0] - start)) > 1e-2  # they did train
    np.testing.assert_allclose(final[0], _flat([p.data for p in single.parameters()]), rtol=1e-12, atol=1e-14)


def test_09_averaging_per_worker_token_means_is_wrong_and_summing_token_weighted_losses_is_right():
    from haaw.course.exercises.nb09 import microbatch_loss, ring_all_reduce

    inputs, targets, mask = padded_batch(lengths=(6, 3, 5, 2))
    _, big = gradient(make_model(), masked_mean, (inputs, targets, mask))
    halves = (slice(0, 2), slice(2, 4))
    assert [mask[h].sum() for h in halves] == [9, 7]
    total = float(mask.sum())

    def worker_grads(loss):
        out = []
        for rows in halves:
            model = make_model()
            loss(token_losses(model, inputs[rows], targets[rows]), mask[rows]).backward()
            out.append(_flat([p.grad for p in model.parameters()]))
        return out

    averaged = ring_all_reduce(worker_grads(masked_mean), Ring(2))[0] / 2
    assert np.max(np.abs(averaged - _flat(big))) > 1e-3
    summed = ring_all_reduce(worker_grads(lambda L, m: microbatch_loss(L, m, total)), Ring(2))[0]
    np.testing.assert_allclose(summed, _flat(big), rtol=1e-12, atol=1e-15)
    # the weights a token gets: 1/(2·9) and 1/(2·7) against 1/16
    assert round(1 / 18, 4) == 0.0556 and round(1 / 14, 4) == 0.0714 and round(1 / total, 4) == 0.0625


def test_09_the_ring_takes_2_n_minus_1_steps_and_every_worker_ends_with_every_contribution():
    for n in (2, 3, 5):
        lines = ring_trace(n).splitlines()
        steps = [line for line in lines if line.startswith(("reduce-scatter", "all-gather"))]
        assert len(steps) == 2 * (n - 1)
        everyone = "".join(str(i) for i in range(n))
        final = lines[-1].split()[2:]  # after "all-gather k"
        assert len(final) == n * n and all(cell[1:] == everyone for cell in final)
        # after the reduce-scatter each worker holds exactly one finished chunk
        after_rs = lines[n].split()[2:]  # header, start, then n − 1 reduce-scatter lines
        per_worker = [after_rs[i * n:(i + 1) * n] for i in range(n)]
        assert all(sum(cell[1:] == everyone for cell in cells) == 1 for cells in per_worker)


def test_09_bytes_stay_bounded_while_latency_grows_in_the_illustrative_model(stored_output):
    # 7e9 parameters, fp32 gradients (notebook 07's mixed precision): 4 bytes each, 28 GB
    gradient_gb = 7e9 * 4 / 1e9
    assert gradient_gb == 28.0
    printed = stored_output("09", "gradient_gb = model_parameters").splitlines()
    # what the all-reduce sends is the gradient in its dtype: bf16 takes 2 bytes a number, half of fp32's
    assert printed[0] == "the gradient of 7e+09 parameters in fp32: 28 GB (in bf16, 2 bytes each: 14 GB)"
    assert 7e9 * 2 / 1e9 == 14.0
    rows = [line.split() for line in printed[2:8]]
    for n, (workers, steps, message, sent, naive) in zip((2, 4, 8, 16, 64, 256), rows):
        assert int(workers) == n and int(steps) == 2 * (n - 1)
        assert float(message) == round(28 / n, 3) and float(sent) == round(2 * (n - 1) / n * 28, 2)
        assert float(naive) == (n - 1) * 28
    assert rows[0][3] == "28.00" and rows[-1][3] == "55.78"   # "28 GB at 2 workers, 55.78 at 256": bounded, not constant
    sent = [ring_bytes_per_worker(n, gradient_gb) for n in (2, 4, 8, 16, 64, 256)]
    assert sent == sorted(sent) and max(sent) < 2 * gradient_gb and sent[0] == 28.0 and sent[1] == 42.0
    latency, bandwidth = 10e-6, 50e9

    def parts(n, size):
        return 2 * (n - 1) * latency, ring_bytes_per_worker(n, size) / bandwidth

    assert all(lat < bw / 10 for lat, bw in (parts(n, 28e9) for n in (8, 64, 256, 1024)))
    bucket = 25 * 2**20
    assert parts(8, bucket)[0] < parts(8, bucket)[1] and parts(64, bucket)[0] > parts(64, bucket)[1]


def test_09_the_course_ring_and_the_exercise_reference_agree_and_the_count_matches_the_formula():
    from haaw.course.nb09 import Ring, ring_all_reduce, ring_bytes_per_worker

    rng = np.random.default_rng(1)
    for n, length in ((1, 4), (3, 7), (4, 81), (6, 5)):
        buffers = [rng.standard_normal(length) for _ in range(n)]
        counted, sent = ring_all_reduce(buffers)
        ring = Ring(n, length=length)
        for a, b in zip(counted, reference(buffers, ring)):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_allclose(a, np.sum(buffers, axis=0), rtol=1e-12, atol=1e-14)
        # the reference passes every number through the ring: 2·(N − 1) steps, each chunk N − 1 hops per phase
        assert ring.steps == 2 * (n - 1) and ring.numbers_sent == 2 * (n - 1) * length
        assert ring.bytes_sent / n == pytest.approx(sent)
        if length % n == 0:
            assert sent == ring_bytes_per_worker(n, buffers[0].nbytes)


def test_09_the_ring_checker_rejects_a_sum_that_never_goes_around_the_ring():
    def shortcut(buffers, send):
        total = np.sum(buffers, axis=0)
        return [total.copy() for _ in buffers]

    def whole_buffers(buffers, send):  # right number of steps, but every worker sends everything
        for _ in range(2 * (len(buffers) - 1)):
            send(buffers)
        return shortcut(buffers, send)

    assert check("09-ring-all-reduce", shortcut).status == WRONG
    assert "no chunk went through send" in check("09-ring-all-reduce", shortcut).message
    assert check("09-ring-all-reduce", whole_buffers).status == WRONG
    assert "one chunk per worker per step" in check("09-ring-all-reduce", whole_buffers).message

    def other_start(buffers, send):  # a correct ring that starts from another chunk is accepted
        n = len(buffers)
        chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
        for step in range(n - 1):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] += received[i]
        for step in range(n - 1):
            received = send([chunks[i][(i + 2 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i + 1 - step) % n] = received[i]
        return [np.concatenate(c) for c in chunks]

    assert check("09-ring-all-reduce", other_start).status == CORRECT


def test_09_averaging_the_workers_mean_gradients_gives_the_big_batch_gradient_at_any_number_of_workers():
    # what DDP's averaging rests on: with equal shards the big batch's mean is the average of the shards' means
    x, y = make_data(64)
    weights = initial_weights()
    big = _flat(shard_gradient(weights, x, y))
    for n in (1, 2, 4, 8, 16):
        means = [_flat(shard_gradient(weights, x[rows], y[rows])) for rows in np.array_split(np.arange(64), n)]
        np.testing.assert_allclose(np.sum(means, axis=0) / n, big, rtol=1e-12, atol=1e-15)
        if n > 1:  # the sum of the means, not divided by n, is n times too large
            assert np.max(np.abs(np.sum(means, axis=0) - big)) > 1e-2


def test_09_accumulating_on_workers_costs_k_all_reduces_unless_only_the_last_microbatch_syncs(stored_output):
    from haaw.course.exercises.nb09 import ring_all_reduce

    x, y = make_data(64)
    weights = initial_weights()
    big = _flat(shard_gradient(weights, x, y))
    n, k = 4, 4
    size = big.nbytes
    assert size == 81 * 8  # the MLP 3 → 16 → 1: 3·16 + 16 + 16 + 1 numbers, float64
    every, last = Ring(n, length=big.size), Ring(n, length=big.size)
    grad_every, grad_local = np.zeros((n, big.size)), np.zeros((n, big.size))
    for j in range(k):
        micro = [_flat(shard_gradient(weights, x[np.array_split(r, k)[j]], y[np.array_split(r, k)[j]], total=64))
                 for r in np.array_split(np.arange(64), n)]
        grad_every += ring_all_reduce(micro, every)
        grad_local += micro
    grad_last = ring_all_reduce(list(grad_local), last)
    per_all_reduce = 2 * (n - 1) / n * size  # the closed form
    assert every.bytes_sent / n == k * per_all_reduce == 3888 and every.steps == k * 2 * (n - 1) == 24
    assert last.bytes_sent / n == per_all_reduce == 972 and last.steps == 2 * (n - 1) == 6
    for g in (*grad_every, *grad_last):
        np.testing.assert_allclose(g, big, rtol=1e-12, atol=1e-15)
    printed = stored_output("09", "k_micro = 4").splitlines()
    assert printed[0] == "all-reduce after every microbatch: 24 ring steps, 3888 bytes sent per worker"
    assert printed[2] == "no_sync, all-reduce after the last: 6 ring steps, 972 bytes sent per worker"
    assert all(line.endswith("agrees (rtol 1e-07)") for line in (printed[1], printed[3]))
    assert printed[4] == "closed form, per all-reduce 2·(N−1)/N·S = 2·3/4·648 = 972 bytes; 4 of them: 3888"


def test_09_overlap_timeline_by_hand_on_tiny_steps():
    from haaw.course.nb09 import overlap_timeline

    # three layers (in backward's order) of 1, 2, 1 s with 2, 1, 3 bytes; buckets of at least 2 bytes; an
    # all-reduce takes 0.5 s + 1 s per byte. Layer 0 fills a bucket at t = 1: all-reduced 1 → 3.5. Layer 1's byte
    # waits; layer 2 ends at 4 and its 3 bytes join it: 4 bytes, 4 → 8.5. Serial: 4 + (0.5 + 6) = 10.5.
    plan = overlap_timeline([1, 2, 1], [2, 1, 3], 2, lambda b: 0.5 + b)
    assert plan["compute"] == [(0, 1), (1, 3), (3, 4)]
    assert plan["buckets"] == [(1, 1, 3.5, 2), (4, 4, 8.5, 4)]
    assert (plan["backward_end"], plan["step_time"], plan["serial_time"]) == (4, 8.5, 10.5)
    # communication slower than compute: the second bucket, launched at 2, waits for the stream until 4
    plan = overlap_timeline([1, 1], [3, 3], 1, lambda b: b)
    assert plan["buckets"] == [(1, 1, 4, 3), (2, 4, 7, 3)] and (plan["step_time"], plan["serial_time"]) == (7, 8)
    # a remainder smaller than a bucket is launched when backward ends
    plan = overlap_timeline([1, 1], [1, 1], 5, lambda b: b)
    assert plan["buckets"] == [(2, 2, 4, 2)] and plan["step_time"] == 4


def test_09_overlap_saves_what_the_closed_form_says_for_the_7b_model(stored_output):
    layer = 4 * (7e9 / 32) * 4096 / 100e12  # one layer's backward, s
    lat = 2 * 7 * 10e-6  # 8 workers: 14 messages of 10 µs

    def comm(nbytes, link):
        return lat + 2 * 7 / 8 * nbytes / link

    # the companion states the assumptions in one cell and lays out the timelines in the next
    lines = (stored_output("09", "layer_count, tokens_per_worker") + stored_output("09", "timelines = {}")).splitlines()
    assert lines.pop(0) == ("assumed: 32 layers of 2.188e+08 parameters, 875 MB of fp32 gradients each; backward at "
                            "100·10¹² FLOPs per second")
    assert 4 * 7e9 / 32 / 1e6 == 875
    assert lines[0] == f"one layer's backward: {1000 * layer:.1f} ms; all of backward: {1000 * 32 * layer:.0f} ms"
    # 50 GB/s: a layer's all-reduce is shorter than a layer's backward, so only the last one sticks out
    fast = comm(875e6, 50e9)
    assert fast < layer
    serial, step = 32 * layer + comm(28e9, 50e9), 32 * layer + fast
    assert lines[1] == (f"links of 50 GB/s: one layer's all-reduce {1000 * fast:.1f} ms; 32 buckets; step without "
                        f"overlap {1000 * serial:.0f} ms, with overlap {1000 * step:.0f} ms: "
                        f"{1000 * (serial - step):.0f} ms saved")
    assert lines[1].endswith("2127 ms, with overlap 1178 ms: 949 ms saved")
    # 25 GB/s: the all-reduces are slower, they queue: the first layer's backward, then 32 all-reduces in a row
    slow = comm(875e6, 25e9)
    assert slow > layer
    serial, step = 32 * layer + comm(28e9, 25e9), layer + 32 * slow
    assert lines[2] == (f"links of 25 GB/s: one layer's all-reduce {1000 * slow:.1f} ms; 32 buckets; step without "
                        f"overlap {1000 * serial:.0f} ms, with overlap {1000 * step:.0f} ms: "
                        f"{1000 * (serial - step):.0f} ms saved")
    assert lines[4].startswith("Figure: ") and f"up to {1000 * 32 * layer:.0f} ms" in lines[4]
    assert f"ends at {1000 * (32 * layer + fast):.0f} ms" in lines[4]
    assert lines[3] == f"the latency of 32 all-reduces instead of one: {1000 * 31 * lat:.1f} ms more"
    assert f"{1000 * 31 * lat:.1f}" == "4.3"


def test_09_zero_memory_per_worker_against_a_hand_formula(stored_output):
    p = 7e9  # bf16 weights 2 bytes, fp32 gradients 4, fp32 master 4, Adam m 4 and v 4
    ddp = p * (2 + 4 + 4 + 4 + 4) / 1e9
    stage1 = {n: p * (2 + 4 + 12 / n) / 1e9 for n in (8, 64)}
    stage2 = {n: p * (2 + 16 / n) / 1e9 for n in (8, 64)}
    assert ddp == 126 and stage1[8] == 52.5 and stage2[8] == 28 and stage2[64] == 15.75 and p * 2 / 1e9 == 14
    assert ddp > 80  # more than an 80 GB accelerator holds
    lines = stored_output("09", "bytes_per_param = {").splitlines()
    assert lines[0] == "18 bytes per parameter in all; GB per worker:"
    table = {" ".join(line.split()[:-2]): [float(v) for v in line.split()[-2:]] for line in lines[2:5]}
    assert table == {"plain DDP": [round(ddp, 1)] * 2, "ZeRO stage 1": [round(stage1[8], 1), round(stage1[64], 1)],
                     "ZeRO stage 2": [round(stage2[8], 1), round(stage2[64], 1)]}
    assert table["ZeRO stage 2"][1] == 15.8


def _numpy_adam(w, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return w - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps), m, v


def test_09_sharded_adam_over_reduce_scatter_and_all_gather_gives_the_unsharded_weights(stored_output):
    from haaw.course.nb09 import all_gather, reduce_scatter

    x, y = make_data(64)
    shapes = [w.shape for w in initial_weights()]
    start = _flat(initial_weights())
    n = 4
    rows = np.array_split(np.arange(64), n)

    def unflat(vector):
        return [p.reshape(s) for p, s in zip(np.split(vector, np.cumsum([np.prod(s) for s in shapes])[:-1]), shapes)]

    def grads(vector):
        return [_flat(shard_gradient(unflat(vector), x[r], y[r], total=64)) for r in rows]

    whole, m, v = start.copy(), np.zeros_like(start), np.zeros_like(start)
    copies = [start.copy() for _ in range(n)]
    chunks = np.array_split(np.arange(start.size), n)  # which weights each chunk index holds
    state = {}
    for t in range(1, 11):
        whole, m, v = _numpy_adam(whole, np.sum(grads(whole), axis=0), m, v, t, 0.05)  # big batch, unsharded
        wires = Ring(n, length=start.size)
        updated = []
        for index, summed in reduce_scatter(grads(copies[0]), wires):
            mi, vi = state.get(index, (np.zeros(summed.size), np.zeros(summed.size)))
            new, *state[index] = _numpy_adam(copies[0][chunks[index]], summed, mi, vi, t, 0.05)
            updated.append((index, new))
        assert sorted(state) == list(range(n))  # every chunk has exactly one owner
        copies = all_gather(updated, wires)
        # a reduce-scatter and an all-gather send what one all-reduce sends
        assert wires.steps == 2 * (n - 1) and wires.numbers_sent == 2 * (n - 1) * start.size
    for c in copies:
        np.testing.assert_allclose(c, whole, rtol=1e-10, atol=1e-13)
    assert np.max(np.abs(whole - start)) > 0.1
    assert stored_output("09", "zero_steps, zero_lr = 10, 0.05") == "the weights moved by up to 0.38 in 10 steps\n"
    assert f"{np.max(np.abs(whole - start)):.2f}" == "0.38"
    lines = stored_output("09", "shard_adams = [Adam(").splitlines()
    assert lines[0] == "each worker keeps m and v for [20, 20, 20, 21] of the 81 weights"
    assert [len(c) for c in np.array_split(np.arange(81), 4)] == [21, 20, 20, 20]  # chunk (i + 1) % 4 for worker i
    assert lines[1] == "the workers' weights after the all-gather are identical: True"
    assert lines[2] == "sharded Adam vs plain data parallelism agrees (rtol 1e-07)"


def test_09_zero_s_reduce_scatter_and_all_gather_send_what_one_all_reduce_sends(stored_output):
    """The companion's ZeRO section: each half of the ring moves (N − 1)·S bytes over all workers together, the all-reduce both."""
    read = stored_output("09", "scatter_wires, gather_wires, reduce_wires")
    n, size = 4, 81 * 8                                    # workers; the small model's 81 float64 weights
    half = (n - 1) * size
    assert (f"reduce-scatter {half:,} + all-gather {half:,} = {2 * half:,}; one all-reduce: {2 * half:,}") in read


def test_09_with_an_all_reduce_that_averages_the_loss_divides_by_the_average_tokens_per_worker(stored_output):
    """The companion: DDP divides the summed gradients by N, so each worker's summed token loss is divided by the
    whole batch's tokens ÷ N; every token then weighs 1 / (total tokens), as with the core's sum and no ÷ N."""
    from haaw.course.exercises.nb09 import microbatch_loss

    inputs, targets, mask = padded_batch(lengths=(6, 3, 5, 2))
    _, big = gradient(make_model(), masked_mean, (inputs, targets, mask))
    halves = (slice(0, 2), slice(2, 4))
    total = float(mask.sum())

    def worker_grads(tokens):
        out = []
        for rows in halves:
            model = make_model()
            microbatch_loss(token_losses(model, inputs[rows], targets[rows]), mask[rows], tokens).backward()
            out.append(_flat([p.grad for p in model.parameters()]))
        return out

    averaged = np.sum(worker_grads(total / 2), axis=0) / 2
    np.testing.assert_allclose(averaged, _flat(big), rtol=1e-12, atol=1e-15)
    own_means = np.sum([_flat(gradient(make_model(), masked_mean, (inputs[r], targets[r], mask[r]))[1])
                        for r in halves], axis=0) / 2
    assert np.max(np.abs(own_means - _flat(big))) > 1e-3  # averaging the workers' own means is not the fix
    lines = stored_output("09", "loss_fn(L, m, total_tokens / 2)").splitlines()
    assert "real tokens per worker: [9.0, 7.0] average: 8.0" in lines
    assert lines[-2:] == ["÷ total tokens, summed agrees (rtol 1e-06)", "÷ average tokens, then ÷ N agrees (rtol 1e-06)"]


def test_09_the_microbatch_loss_checker_runs_nine_cases_five_by_hand_and_four_drawn():
    """The core's Exercise 3 says what its checker does: nine cases, five splits chosen by hand and four drawn at
    random, and the checker's own verdict counts the same nine."""
    from haaw.course.exercises import REGISTRY

    exercise = REGISTRY["09-token-weighted"]
    assert len(exercise.cases()) == 5 and len(exercise.all_cases()) == 9
    assert "passed all 9 cases" in check("09-token-weighted", guard.unguarded(exercise.reference)).message


# --- section 6: the learning rate and the effective batch ------------------------------------------------------
def _per_example_gradients(weights, x, y):
    """Each example's gradient of its own squared error, one row each: the batch gradient of a mean loss is the
    mean of its rows, whatever code computes it."""
    return np.array([np.concatenate([np.ravel(g) for g in shard_gradient(weights, x[i:i + 1], y[i:i + 1])])
                     for i in range(len(x))])


def test_09_a_batch_s_noise_halves_when_it_grows_fourfold_and_its_mean_is_the_whole_set_s(stored_output):
    from haaw.course.nb09 import gradient_spread

    x, y = make_data(512, seed=1)
    weights = initial_weights()
    rows = _per_example_gradients(weights, x, y)
    full = rows.mean(axis=0)
    variance = np.mean(np.sum((rows - full) ** 2, axis=1)) * len(x) / (len(x) - 1)
    read = stored_output("09", "gradient_spread(weights")
    printed = {int(b): (int(n), int(m)) for b, n, m in
               re.findall(r"batch +(\d+): one batch's gradient strays (\d+)% .*?batches' gradients strays (\d+)%", read)}
    assert sorted(printed) == [4, 16, 64]
    for batch, (noise, mean_off) in printed.items():
        # sampling without replacement: the rms distance of a batch mean from the whole mean, as a formula
        expected = np.sqrt(variance / batch * (len(x) - batch) / (len(x) - 1)) / np.linalg.norm(full)
        assert abs(noise / 100 - expected) < 0.15 * expected             # 200 draws: within sampling error
        assert mean_off / 100 < 2 * expected / np.sqrt(200)               # the mean stays the whole set's
        # "about what chance leaves after 200 draws": the printed noise / √200, and the mean within 2× of it
        assert f"({noise}% / √200 = {noise / 100 / np.sqrt(200):.0%})" in read
        assert mean_off / 100 < 2 * round(noise / 100 / np.sqrt(200), 2) + 0.005
        assert gradient_spread(weights, x, y, batch) == pytest.approx((mean_off / 100, noise / 100), abs=0.005)
    assert 1.7 < printed[4][0] / printed[16][0] < 2.4 and 1.7 < printed[16][0] / printed[64][0] < 2.4   # "√2" per ×2


def test_09_loss_after_is_plain_sgd_on_shuffled_batches_of_a_mean_loss():
    from haaw.course.nb09 import loss_after

    x, y = make_data(512, seed=1)
    weights = initial_weights()
    model = model_with(weights)
    optimizer = SGD(model.parameters(), lr=0.08)
    order = np.random.default_rng(0).permutation(512)   # the first epoch's order: 4096 examples would need 8
    for rows in np.array_split(order, 32)[:20]:            # 20 steps of 16 examples = 320 examples
        optimizer.zero_grad()
        (summed_loss(model, x[rows], y[rows]) / 16).backward()
        optimizer.step()
    by_hand = summed_loss(model, x, y).item() / 512
    assert loss_after(weights, x, y, batch=16, lr=0.08, examples=320) == pytest.approx(by_hand, rel=1e-12)


def test_09_linear_scaling_holds_to_a_batch_of_32_and_breaks_at_64_and_128(stored_output):
    from haaw.course.nb09 import loss_after

    read = stored_output("09", "def verdict(loss, reference):")
    verdict = r"(diverged|([\d.]+)× \((within \d+%|far off), (higher|lower)\))"
    rows = {int(m[0]): m[1:] for m in re.findall(rf"^ *(\d+) +([\d.]+)  {verdict} *  {verdict}$", read, re.M)}
    assert sorted(rows) == [8, 16, 32, 64, 128]
    x, y = make_data(512, seed=1)
    base = loss_after(initial_weights(), x, y, batch=4, lr=0.02, examples=4096)
    assert f"batch 4, lr 0.02: loss {base:.3f} after 4096 examples" in read
    for batch, (lr, *printed) in rows.items():
        assert float(lr) == pytest.approx(0.02 * batch / 4)                               # rates scaled linearly
        for (said, ratio, band, side), rate in zip((printed[:4], printed[4:]), (float(lr), 0.02)):
            loss = loss_after(initial_weights(), x, y, batch=batch, lr=rate, examples=4096)
            if said == "diverged":
                assert loss == float("inf")
                continue
            # the ratio to 2 decimals: each sits more than 1e-5 from a rounding edge (the closest, 4.78499, 1.2e-5),
            # far beyond what another BLAS moves it (1e-15 under OPENBLAS_CORETYPE=Prescott), so the digits hold
            assert float(ratio) == pytest.approx(loss / base, abs=0.005)
            assert abs((loss / base * 100) % 1 - 0.5) > 1e-3
            assert side == ("higher" if loss > base else "lower")
            tol = {"within 1%": 0.01, "within 5%": 0.05, "within 20%": 0.2}.get(band)
            assert (abs(loss / base - 1) < tol) if tol else abs(loss / base - 1) >= 0.2
    # a row: (lr, then for scaled and unscaled each: what it says, its ratio, its band, higher or lower)
    assert all(rows[b][3] in ("within 1%", "within 5%") for b in (8, 16, 32))             # "within 5% up to 32"
    assert rows[64][2:5] == ("1.13", "within 20%", "higher") and rows[128][1] == "diverged"   # "1.13 times as high"
    assert all(float(r[6]) >= 3 and r[8] == "higher" for r in rows.values())              # unscaled: "far behind"
    assert "the whole set's gradient, 300 steps at lr 0.64: diverged" in read
    assert "(diverged: past 100× its start)" in read
    x, y = make_data(512, seed=1)
    whole = loss_after(initial_weights(), x, y, batch=512, lr=0.32, examples=300 * 512)
    assert whole < 0.1   # half that rate converges on the whole set's gradient: 0.64 overshoots, it is no noise


def test_09_zero_stage_3_gives_the_same_weights_for_one_and_a_half_times_the_all_reduce_s_bytes(stored_output):
    """Two all-gathers of the weights and one reduce-scatter of the gradients, each (N − 1)·S bytes over all
    workers, against the all-reduce's 2·(N − 1)·S; the small model's 81 float64 weights on 4 workers."""
    read = stored_output("09", "def gather_layer(")
    n, size = 4, 81 * 8
    one = (n - 1) * size
    assert "ZeRO stage 3 vs plain data parallelism agrees" in read
    assert (f"all-gather forward {one:,} + all-gather backward {one:,} + reduce-scatter {one:,} = {3 * one:,}"
            in read)
    assert f"one all-reduce: {2 * one:,}; stage 3 sends 1.5 times as much" in read


def test_09_zero_stage_3_divides_all_18_bytes_by_n_and_sends_3_n_minus_1_over_n(stored_output):
    read = stored_output("09", "def traffic_per_worker(")
    rows = {line[:14].strip(): line[14:].split() for line in read.splitlines()[1:]}
    params = 7e9
    whole_sharded = {"plain DDP": (18, 0), "ZeRO stage 1": (6, 12), "ZeRO stage 2": (2, 16), "ZeRO stage 3": (0, 18)}
    for stage, (whole, sharded) in whole_sharded.items():
        gb8, gb64, t8, _, t64, _ = rows[stage]
        assert float(gb8) == pytest.approx(params * (whole + sharded / 8) / 1e9, abs=0.005)
        assert float(gb64) == pytest.approx(params * (whole + sharded / 64) / 1e9, abs=0.005)
        passes = 3 if stage == "ZeRO stage 3" else 2
        assert float(t8) == pytest.approx(passes * 7 / 8, abs=5e-4)
        assert float(t64) == pytest.approx(passes * 63 / 64, abs=5e-4)
    assert float(rows["ZeRO stage 3"][1]) < 2 and rows["ZeRO stage 2"][1] == "15.75"


def _pipeline_by_hand(p, m, forward=1, backward=2):
    """GPipe's step by its recurrences: a stage starts micro-batch j's forward when it has finished j − 1 and the
    stage before has finished j; backwards run from the last stage to the first, last micro-batch's first...
    written independently of the course's simulator."""
    f = np.zeros((p, m))
    for s in range(p):
        for j in range(m):
            f[s, j] = max(f[s, j - 1] if j else 0, f[s - 1, j] if s else 0) + forward
    b = np.zeros((p, m))
    for s in reversed(range(p)):
        for j in range(m):
            ready = b[s + 1, j] if s < p - 1 else f[s, j]
            b[s, j] = max(b[s, j - 1] if j else f[s, m - 1], ready) + backward
    step = b.max()
    return 1 - m * (forward + backward) / step


def test_09_the_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1_for_gpipe_and_1f1b_alike(stored_output):
    read = stored_output("09", 'bubble_rows = {}')
    p = 4
    for m in (1, 2, 4, 8, 16, 32):
        formula = (p - 1) / (m + p - 1)
        assert _pipeline_by_hand(p, m) == pytest.approx(formula, abs=1e-12)
        line = next(x for x in read.splitlines() if re.match(rf"\s+{m}\s+\d", x))
        cells = line.split()
        assert cells[1] == cells[2] == cells[3] == f"{formula:.1%}"
        assert cells[4:] == [f"{m},", str(min(p, m))]  # in flight on stage 0: GPipe m, 1F1B at most p
    assert "measured equals the formula, both schedules, every m: True" in read
    assert "27.3%" in read and "8.6%" in read


def test_09_megatron_s_split_mlp_gives_one_worker_s_output_and_gradients_for_one_all_reduce_each_way(stored_output):
    """Independently: A by columns, B by rows, on 2 and 4 workers; the sums of the shares are one worker's."""
    rng = np.random.default_rng(11)
    x, a, b, dz = (rng.standard_normal(s) for s in ((5, 6), (6, 12), (12, 6), (5, 6)))
    y = np.tanh(x @ a)
    dh = (dz @ b.T) * (1 - y**2)
    for n in (2, 4):
        cols, rows = np.split(np.arange(12), n), np.split(np.arange(12), n)
        ys = [np.tanh(x @ a[:, c]) for c in cols]
        assert np.allclose(sum(yi @ b[r] for yi, r in zip(ys, rows)), y @ b)  # the forward all-reduce
        dhs = [(dz @ b[r].T) * (1 - yi**2) for yi, r in zip(ys, rows)]
        assert np.allclose(sum(dhi @ a[:, c].T for dhi, c in zip(dhs, cols)), dh @ a.T)  # the backward one
        assert np.allclose(np.hstack([x.T @ dhi for dhi in dhs]), x.T @ dh)  # no communication
        assert np.allclose(np.vstack([yi.T @ dz for yi in ys]), y.T @ dz)
    read = stored_output("09", "def all_reduce(shares, phase)")
    assert read.count("agrees") == 4
    assert "all-reduces: 1 in forward, 1 in backward, each of 48 numbers" in read


def test_09_diverged_means_a_loss_past_100_times_its_start(monkeypatch):
    from haaw.course import nb09

    x, y = make_data(512, seed=1)
    assert nb09.DIVERGED == 100
    assert np.isfinite(nb09.loss_after(initial_weights(), x, y, batch=4, lr=0.02, examples=64))
    monkeypatch.setattr(nb09, "DIVERGED", 0.5)   # the run's own threshold: below its start, it stops at once
    assert nb09.loss_after(initial_weights(), x, y, batch=4, lr=0.02, examples=64) == float("inf")
