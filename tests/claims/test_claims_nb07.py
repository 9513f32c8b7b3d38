"""The claims of notebook 07: each figure or causal claim the notebook states, asserted.

The figures are recomputed here without the engine, the loss scalers or the optimizer: a NumPy forward and
backward pass of the notebook's MLP that rounds to 16 bits where the notebook's does (matrix products
accumulated in fp32, then rounded; elementwise operations in the 16-bit format; the loss in fp32), and Adam
written out. Only the data and the fp32 starting weights come from ``haaw.course.nb07``. The table test
compares the table the core stores with this independent run; the companion
(notebooks/deeper/07_mixed_precision_deeper.ipynb) holds the fp8 recipes, the simulation's limits, the fp16
backward entry by entry and the scaler's log, and its stored outputs are read the same way.
"""
import json
import ml_dtypes
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from haaw.amp import StaticLossScaler
from haaw.course.nb07 import classification_data, pretrained_weights

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "07_mixed_precision.ipynb"
COMPANION = NOTEBOOK.parent / "deeper" / "07_mixed_precision_deeper.ipynb"
TOKENS = 2**17
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)


def _start():
    x, labels = classification_data()
    return x, labels, [np.array(w, dtype=np.float32) for w in pretrained_weights(steps=300)]


def _zero_share(values, fmt, scale=1.0):
    """The share of the nonzero ``values`` (times ``scale``) that become 0 when stored in ``fmt``."""
    values = np.asarray(values, dtype=np.float64)
    values = values[values != 0]
    with np.errstate(over="ignore"):
        return float(np.mean((values * scale).astype(fmt) == 0))


def _inf_share(values, fmt, scale):
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        return float(np.mean(~np.isfinite((values * scale).astype(fmt).astype(np.float64))))


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _mm(a, b, low):
    """A matrix product as the notebook's engine (and accelerators) do it: fp32 sums, rounded to ``low``."""
    return (a.astype(np.float32) @ b.astype(np.float32)).astype(low)


def _forward_backward(ws, x, labels, low, scale, tokens=TOKENS):
    """(mean loss per example, dL/dlogits in ``low``, parameter gradients in ``low``) of loss · scale."""
    w1, b1, w2, b2, w3, b3 = [w.astype(low) for w in ws]
    x = x.astype(low)
    h1 = np.tanh(_mm(x, w1, low) + b1)
    h2 = np.tanh(_mm(h1, w2, low) + b2)
    logits = (_mm(h2, w3, low) + b3).astype(np.float32)                # the loss in fp32
    p = _softmax(logits)
    rows = np.arange(len(labels))
    loss = -np.log(p[rows, labels]).astype(np.float64).mean()
    onehot = np.zeros_like(p)
    onehot[rows, labels] = 1
    g3 = ((p - onehot) * np.float32(scale / tokens)).astype(low)       # back in 16 bits
    g2 = _mm(g3, w3.T, low) * (1 - h2 * h2)
    g1 = _mm(g2, w2.T, low) * (1 - h1 * h1)
    column_sum = lambda g: g.astype(np.float32).sum(axis=0).astype(low)  # noqa: E731
    grads = [_mm(x.T, g1, low), column_sum(g1), _mm(h1.T, g2, low), column_sum(g2), _mm(h2.T, g3, low),
             column_sum(g3)]
    return loss, g3, grads


def _stochastic_bf16(values, rng):
    """fp32 values rounded to bf16 at random, by their bit patterns: the lower 16 bits are the chance of going away
    from 0 (the companion's round_stochastic works on values instead, with the chance of going up)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    away = rng.integers(0, 65536, bits.shape, dtype=np.uint32) < (bits & np.uint32(0xFFFF))
    return ((bits & np.uint32(0xFFFF0000)) + (away.astype(np.uint32) << np.uint32(16))).view(np.float32)


def _train(low, dynamic=False, keep_master=True, steps=200, lr=1e-4, tokens=TOKENS, growth_interval=50,
           rounding="nearest"):
    """The notebook's training loop, written again: Adam on fp32 masters, optional dynamic loss scaling; without
    masters, the weights kept in ``low`` rounded to nearest, stochastically, or with a compensation (Kahan)."""
    x, labels, ws = _start()
    rng = np.random.default_rng(5)
    carry = [np.zeros_like(w) for w in ws]
    master = [w.copy() for w in ws]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    scale, good, t = (2.0**16 if dynamic else 1.0), 0, 0
    losses, skipped, zeros, entries, moved, lost, coasted = [], 0, 0, 0, 0, 0, 0
    for _ in range(steps):
        loss, _, grads = _forward_backward(master, x, labels, low, scale, tokens)
        losses.append(loss)
        grads = [g.astype(np.float32) / np.float32(scale) for g in grads]
        found_inf = not all(np.all(np.isfinite(g)) for g in grads)
        if dynamic:
            if found_inf:
                scale, good = scale / 2, 0
            else:
                good += 1
                if good == growth_interval:
                    scale, good = scale * 2, 0
        if found_inf:
            skipped += 1
            continue
        norm = np.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
        grads = [g * np.float32(min(1.0, 1.0 / (norm + 1e-6))) for g in grads]
        zeros += sum(int(np.sum(g == 0)) for g in grads)
        entries += sum(g.size for g in grads)
        t += 1
        for i, g in enumerate(grads):
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            step = np.float32(lr) * (m[i] / (1 - 0.9**t)) / (np.sqrt(v[i] / (1 - 0.999**t)) + np.float32(1e-8))
            new = (master[i] - step).astype(np.float32)
            if keep_master or rounding == "nearest":
                kept = new if keep_master else new.astype(low).astype(np.float32)
            elif rounding == "stochastic":
                kept = _stochastic_bf16(new, rng)
            else:  # compensated: the update plus what rounding dropped before, and what it drops now kept in low
                wanted = master[i] + ((new - master[i]) + carry[i])
                kept = wanted.astype(low).astype(np.float32)
                carry[i] = (wanted - kept).astype(low).astype(np.float32)
            moved += int(np.sum(new != master[i]))
            coasted += int(np.sum((new != master[i]) & (g == 0)))  # no gradient, moved all the same
            lost += int(np.sum((new != master[i]) & (kept == master[i])))
            master[i] = kept
    return {"losses": losses, "skipped": skipped, "scale": scale, "zero": zeros / entries, "lost": lost / moved,
            "zero moved": coasted / max(zeros, 1), "weights": master}


def _drop(run):
    return run["losses"][0] - run["losses"][-1]


@lru_cache(maxsize=1)
def _runs():
    return {
        "fp32": _train(np.dtype(np.float32)),
        "fp16, no loss scaling": _train(F16),
        "fp16 + loss scaling": _train(F16, dynamic=True),
        "fp16 + scaling, no master": _train(F16, dynamic=True, keep_master=False),
        "bf16": _train(BF16),
        "bf16, no master": _train(BF16, keep_master=False),
    }


@pytest.mark.upstream
def test_07_fp16_and_bf16_limits_and_a_small_update_that_both_round_away():
    assert float(np.finfo(np.float16).max) == 65504
    with np.errstate(over="ignore"):
        assert np.isinf(np.array([65536.0]).astype(np.float16)[0])  # 2^16 is no fp16 number
        assert np.isinf(np.float16(2.5) * np.array([65536.0]).astype(np.float16)[0])
    assert ml_dtypes.finfo(BF16).smallest_normal == np.finfo(np.float32).smallest_normal  # fp32's range
    w = {name: np.ones(1, dtype=d) for name, d in (("fp32", np.float32), ("fp16", F16), ("bf16", BF16))}
    for _ in range(100):
        w = {name: (a.astype(np.float32) - np.float32(1e-4)).astype(a.dtype) for name, a in w.items()}
    assert w["fp16"][0] == 1 and w["bf16"][0] == 1  # 1 − 10⁻⁴ rounds back to 1, every time
    assert abs(float(w["fp32"][0]) - 0.99) < 1e-5
    assert ml_dtypes.finfo(BF16).eps / np.finfo(np.float16).eps == 8  # bf16's gaps are 8 times fp16's


def test_07_a_confident_model_s_gradients_underflow_in_fp16_and_rounding_to_nearest_saves_some():
    x, labels, ws = _start()
    loss, _, _ = _forward_backward(ws, x, labels, np.dtype(np.float64), 1.0)
    w1, b1, w2, b2, w3, b3 = [w.astype(np.float64) for w in ws]
    logits = np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2) @ w3 + b3
    assert np.all(np.argmax(logits, axis=1) == labels)  # accuracy 100%
    onehot = np.eye(logits.shape[1])[labels]
    grads = (_softmax(logits) - onehot) / TOKENS  # dL/dlogits, by hand
    size = np.abs(grads[grads != 0])
    below, zero = np.mean(size < 2.0**-24), _zero_share(grads, F16)
    assert round(below, 3) == 0.977 and round(zero, 3) == 0.927  # the notebook's 97.7% and 92.7%
    assert zero == np.mean(size <= 2.0**-25)  # round to nearest: only values up to 2^-25 become 0
    assert round(below - zero, 3) == 0.050  # those between 2^-25 and 2^-24 round up
    assert _zero_share(grads, BF16) == 0.0
    # loss scaling moves them back into range; far too large a scale overflows the largest
    assert round(_zero_share(grads, F16, 2.0**16), 3) == 0.062 and _inf_share(grads, F16, 2.0**16) == 0
    assert _zero_share(grads, F16, 2.0**30) == 0 and _inf_share(grads, F16, 2.0**30) == 0
    assert _inf_share(grads, F16, 2.0**40) > 0.01
    assert 2.0**-30 * 64 == 2.0**-24  # exercise 2


def test_07_in_an_fp16_backward_parameter_gradients_vanish_unless_the_loss_is_scaled():
    x, labels, ws = _start()
    shares = {}
    for scale in (1.0, 2.0**16):
        _, g3, grads = _forward_backward(ws, x, labels, F16, scale)
        shares[scale] = (np.mean(g3 == 0), np.mean(np.concatenate([g.ravel() for g in grads]) == 0))
    assert shares[1.0][0] > 0.9 and 0.1 < shares[1.0][1] < 0.25  # the notebook: 92.6% and 17.2%
    assert shares[2.0**16][0] < 0.07 and shares[2.0**16][1] == 0.0  # 6.2% and none


def test_07_fp8_needs_a_scale_per_tensor_gradients_need_e5m2_s_range_activations_e4m3_s_precision():
    x, labels, ws = _start()
    w1, b1 = ws[0].astype(np.float64), ws[1].astype(np.float64)
    activations = np.tanh(x @ w1 + b1)
    w2, b2, w3, b3 = [w.astype(np.float64) for w in ws[2:]]
    logits = np.tanh(activations @ w2 + b2) @ w3 + b3
    grads = (_softmax(logits) - np.eye(logits.shape[1])[labels]) / TOKENS

    def stored(values, fmt):
        factor = float(ml_dtypes.finfo(fmt).max) / np.max(np.abs(values))
        return (values * factor).astype(fmt).astype(np.float64) / factor

    def typical_error(values, fmt):
        s = stored(values, fmt)
        kept = (s != 0) & (values != 0)
        return np.median(np.abs(s[kept] - values[kept]) / np.abs(values[kept]))

    for fmt in (E4M3, E5M2):
        assert _zero_share(grads, fmt) == 1.0  # without a factor, fp8 keeps no gradient at all
        assert _zero_share(activations, fmt) < 0.001 and np.all(stored(activations, fmt) != 0)
    assert np.mean(stored(grads, E5M2) == 0) == 0.0 and round(np.mean(stored(grads, E4M3) == 0), 3) == 0.055
    e4, e5 = typical_error(activations, E4M3), typical_error(activations, E5M2)
    assert round(e4, 3) == 0.021 and round(e5, 3) == 0.042 and 0.4 < e4 / e5 < 0.6  # "half of E5M2's"
    span = lambda fmt: np.log2(float(ml_dtypes.finfo(fmt).max) / float(ml_dtypes.finfo(fmt).smallest_subnormal))  # noqa: E731
    assert round(span(E4M3)) == 18 and round(span(E5M2)) == 32
    assert round(np.log2(np.abs(grads).max() / np.abs(grads).min())) == 31


def test_07_the_dynamic_scaler_of_exercise_3():
    scale, good = 1024.0, 0
    for found_inf in [True, True, False, False, False, False]:
        if found_inf:
            scale, good = scale / 2, 0
        else:
            good += 1
            if good == 3:
                scale, good = scale * 2, 0
    assert scale == 512


def test_07_late_in_training_both_fixes_matter_and_bf16_needs_master_weights_but_no_scaling():
    runs = _runs()
    share = {name: _drop(r) / _drop(runs["fp32"]) for name, r in runs.items()}
    assert runs["fp32"]["zero"] == 0 and runs["fp32"]["lost"] == 0
    # without loss scaling, fp16 zeroes a large share of gradient entries and falls well behind
    assert runs["fp16, no loss scaling"]["zero"] > 0.15 and 0.4 < share["fp16, no loss scaling"] < 0.65
    # with it (2^16, growing to 2^20, no overflow) fp16 is fp32's run
    scaled = runs["fp16 + loss scaling"]
    # "hardly any entry is 0 (0.0% to one decimal)": this rewrite zeroes none; the notebook's run, on the engine's
    # fp16 matrix products, zeroes 3 entries of the second layer's weight gradient in 200 steps (a share of 8e-6)
    assert scaled["zero"] < 0.0005 and scaled["skipped"] == 0 and scaled["scale"] == 2.0**20
    assert abs(scaled["losses"][-1] - runs["fp32"]["losses"][-1]) < 0.01 * runs["fp32"]["losses"][-1]
    # without master weights, updates are rounded away: some in fp16, nearly all in bf16
    assert runs["fp16 + scaling, no master"]["lost"] > 0.4 and 0.35 < share["fp16 + scaling, no master"] < 0.6
    assert runs["bf16, no master"]["lost"] > 0.85 and share["bf16, no master"] < 0.15
    # bf16 with master weights: no gradient is 0 without any scaling, and it matches fp32
    assert runs["bf16"]["zero"] == 0 and abs(share["bf16"] - 1) < 0.05


def test_07_try_it_a_plain_mean_needs_no_scaling_and_a_larger_learning_rate_loses_fewer_updates():
    fp32 = _train(np.dtype(np.float32), tokens=128)
    plain = _train(F16, tokens=128)
    assert plain["zero"] < 0.01 and _drop(plain) / _drop(fp32) > 0.95
    fp32_fast = _train(np.dtype(np.float32), lr=1e-3)
    fast = _train(F16, dynamic=True, keep_master=False, lr=1e-3)
    assert fast["lost"] < 0.5 * _runs()["fp16 + scaling, no master"]["lost"]
    assert _drop(fast) / _drop(fp32_fast) > 0.95
    assert _train(BF16, keep_master=False, lr=1e-3)["lost"] > 0.5  # bf16 still loses many


def _joined(text):
    return "".join(text) if isinstance(text, list) else text


def _printed(source: str, notebook: Path = NOTEBOOK) -> str:
    """What the first code cell of ``notebook`` holding ``source`` printed, as the notebook is stored."""
    cells = json.loads(notebook.read_text())["cells"]
    return next("".join(_joined(o.get("text", "")) for o in c.get("outputs", []))
                for c in cells if c["cell_type"] == "code" and source in _joined(c["source"]))


def _stored_table():
    text = _printed("runs = {")
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(.+?)\s+([\d.]+)\s+([\d.]+)\s+(\d+)%\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)$", line)
        if m:
            rows[m.group(1)] = [float(g) for g in m.groups()[1:]]
    return rows


def test_07_the_table_the_notebook_prints_is_what_an_independent_run_gives():
    table, runs = _stored_table(), _runs()
    assert list(table) == list(runs)
    for name, (start, end, share, zero, lost, skipped) in table.items():
        r = runs[name]
        assert start == pytest.approx(r["losses"][0], abs=1e-5) and end == pytest.approx(r["losses"][-1], abs=3e-5)
        assert share == pytest.approx(100 * _drop(r) / _drop(runs["fp32"]), abs=2)
        assert zero == pytest.approx(100 * r["zero"], abs=1) and lost == pytest.approx(100 * r["lost"], abs=1)
        assert skipped == r["skipped"]


@pytest.mark.upstream
def test_07_one_overflowing_gradient_entry_becomes_inf_then_the_next_forward_pass_gives_nan():
    assert np.isfinite(np.float16(3.0))  # unscaled, the large entry fits in fp16: the scale overflows it
    scaled = np.array([3.0, 2e-4, 3e-4], dtype=np.float32) * np.float32(2.0**16)
    with np.errstate(invalid="ignore", over="ignore"):
        in_fp16 = scaled.astype(np.float16)
        assert np.isinf(in_fp16[0]) and np.all(np.isfinite(in_fp16[1:]))  # only the first entry overflows
        weights = np.ones(3, dtype=np.float32) - 0.01 * in_fp16.astype(np.float32) / 2.0**16
        outputs = np.array([[1.0, 1.0, 1.0], [-1.0, 1.0, 1.0]], dtype=np.float32) @ weights
    assert np.isneginf(weights[0]) and np.all(np.isfinite(weights[1:]))
    with np.errstate(invalid="ignore"):  # −inf + inf: the nan this test is about
        assert np.isneginf(outputs[0]) and np.isposinf(outputs[1]) and np.isnan(outputs.mean())


def test_07_the_static_scaler_reports_the_entry_that_overflowed():
    with np.errstate(over="ignore"):
        in_fp16 = (np.array([3.0, 2e-4, 3e-4], dtype=np.float32) * np.float32(2.0**16)).astype(np.float16)
    assert StaticLossScaler(2.0**16).unscale([in_fp16])[1]
    assert not StaticLossScaler(2.0**16).unscale([in_fp16[1:]])[1]


def test_07_the_simulation_s_parameter_gradients_are_about_2_to_the_10_smaller_than_a_real_batch_s():
    x, labels = classification_data()
    w = [np.asarray(a, dtype=np.float64) for a in pretrained_weights(steps=300)]
    # plain numpy forward and backward of the tanh MLP, sum of the 128 losses / 2**17
    grads, h, acts = [], x.astype(np.float64), [x.astype(np.float64)]
    layers = [(w[i], w[i + 1]) for i in range(0, len(w), 2)]
    for k, (W, b) in enumerate(layers):
        z = h @ W + b
        h = np.tanh(z) if k < len(layers) - 1 else z
        acts.append(h)
    p = np.exp(h - h.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    d = (p - np.eye(p.shape[1])[labels]) / 2**17
    for k in range(len(layers) - 1, -1, -1):
        W, b = layers[k]
        grads += [np.abs(acts[k].T @ d).ravel(), np.abs(d.sum(axis=0)).ravel()]
        d = (d @ W.T) * (1 - acts[k] ** 2) if k > 0 else None
    g = np.concatenate(grads)
    assert np.median(g) == pytest.approx(5.2e-8, rel=0.06)
    assert round(100 * np.mean(g < 1e-7)) == 77 and round(100 * np.mean(g < 1e-8)) == 11
    g32 = g.astype(np.float32)
    assert 100 * np.mean(g32.astype(np.float16) == 0) == pytest.approx(31.7, abs=0.3)
    assert 100 * np.mean((g32 * 32).astype(np.float16) == 0) == pytest.approx(0.7, abs=0.1)
    assert 100 * np.mean((g32 * 1024).astype(np.float16) == 0) == pytest.approx(0.1, abs=0.1)
    # a real batch adds 2**17 per-token shares where this one adds 128 = 2**7: 2**10 times more if they line up,
    # 2**5 if their signs are as good as random (a sum of N random signs grows like √N)
    assert 2**17 // 128 == 2**10 and np.sqrt(2**17 / 128) == 2**5


def test_07_a_mean_of_shares_with_random_signs_shrinks_like_one_over_root_n():
    """The companion, what the simulation reproduces: averaging does not shrink a gradient whose shares line up,
    and shrinks it like 1/√N when their signs are random (the truth behind "averaging does not shrink")."""
    rng = np.random.default_rng(7)
    for n in (2**7, 2**17):
        mean = rng.choice(np.array([-1, 1], dtype=np.int8), size=(64, n)).sum(axis=1, dtype=np.int64) / n
        assert np.sqrt(np.mean(mean**2)) == pytest.approx(1 / np.sqrt(n), rel=0.25)
        assert np.ones(n).mean() == 1.0
    text = _printed("shares = rng.choice(", COMPANION)
    assert "1024 times larger if aligned, 32 times if random" in text


def test_07_under_data_parallelism_the_fp16_backward_sees_one_over_a_worker_s_tokens():
    """The companion: with W workers each loss is a mean over 2^17 / W tokens, so dL/dlogits is W times larger in
    each worker's 16-bit backward, and fewer of them underflow; the 1/W comes later, in the fp32 all-reduce."""
    x, labels, ws = _start()
    w1, b1, w2, b2, w3, b3 = [w.astype(np.float64) for w in ws]
    logits = np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2) @ w3 + b3
    per_token = _softmax(logits) - np.eye(logits.shape[1])[labels]
    shares = {w: _zero_share(per_token / (TOKENS // w), F16) for w in (1, 8, 64)}
    assert [round(100 * shares[w], 1) for w in (1, 8, 64)] == [92.7, 68.1, 49.9]
    # each worker's mean, then the all-reduce's mean over the workers: the mean over all the tokens
    parts = np.split(per_token, 8)
    assert np.allclose(np.mean([p.sum(axis=0) / len(p) for p in parts], axis=0), per_token.mean(axis=0))


def test_07_fp8_block_factors_barely_help_dl_dlogits_whose_spread_lies_within_each_example():
    """The companion's fp8 table: a power-of-two factor per 32 values (as MXFP8) leaves E4M3 losing 4.5% of
    dL/dlogits against 5.5% with one factor per tensor; E5M2 keeps all of them either way."""
    x, labels, ws = _start()
    w = [a.astype(np.float64) for a in ws]
    logits = np.tanh(np.tanh(x @ w[0] + w[1]) @ w[2] + w[3]) @ w[4] + w[5]
    grads = (_softmax(logits) - np.eye(logits.shape[1])[labels]) / TOKENS

    def blocked(values, fmt, block=32):
        v = values.reshape(-1, block)
        factor = 2.0 ** np.floor(np.log2(float(ml_dtypes.finfo(fmt).max) / np.max(np.abs(v), axis=1, keepdims=True)))
        return ((v * factor).astype(fmt).astype(np.float64) / factor).reshape(values.shape)

    assert round(np.mean(blocked(grads, E4M3) == 0), 3) == 0.045 and np.mean(blocked(grads, E5M2) == 0) == 0
    # the spread lies largely within each example's 8 logits: a factor for every example still loses some
    assert np.mean(blocked(grads, E4M3, block=8) == 0) > 0.01


def test_07_adam_s_step_is_near_lr_when_gradients_agree_and_well_below_when_they_are_noisy():
    """Core section 6 and the companion: lr × m̂ / √v̂ is at most about lr; in the full-batch fp32 run the ratio
    stays near 1 (the same 128 examples at every step), with noise it is well below 1."""
    x, labels, ws = _start()
    master = [w.copy() for w in ws]
    m = [np.zeros_like(w) for w in ws]
    v = [np.zeros_like(w) for w in ws]
    ratios = []
    for t in range(1, 201):
        _, _, grads = _forward_backward(master, x, labels, np.dtype(np.float32), 1.0)
        for i, g in enumerate(grads):
            g = g.astype(np.float32)
            m[i] = 0.9 * m[i] + 0.1 * g
            v[i] = 0.999 * v[i] + 0.001 * g * g
            m_hat, v_hat = m[i] / (1 - 0.9**t), v[i] / (1 - 0.999**t)
            ratios.append((np.abs(m_hat) / np.sqrt(v_hat)).ravel())
            master[i] = master[i] - np.float32(1e-4) * m_hat / (np.sqrt(v_hat) + np.float32(1e-8))
    ratios = np.concatenate(ratios)
    assert np.median(ratios[np.isfinite(ratios)]) > 0.8
    text = _printed("for steady, noise in", COMPANION)
    typical = [float(t) for t in re.findall(r"typically ([\d.]+)", text)]
    assert typical[0] == 1.0 and all(t < 0.8 for t in typical[1:]) and typical[-1] < 0.2


def test_07_the_companion_s_runs_of_the_core_s_loop_agree_with_the_independent_rewrite():
    """``nb07.train``, the loop the companion runs, against the rewrite above: fp16 without loss scaling and with
    it but without master weights, at the tolerances of the table test."""
    from haaw.amp import DynamicLossScaler
    from haaw.course.nb07 import train

    runs = _runs()
    for name, run in (("fp16, no loss scaling", train("float16")),
                      ("fp16 + scaling, no master", train("float16", DynamicLossScaler(growth_interval=50),
                                                          keep_master=False))):
        r = runs[name]
        assert run["losses"][0] == pytest.approx(r["losses"][0], abs=1e-5)
        assert run["losses"][-1] == pytest.approx(r["losses"][-1], abs=3e-5)
        assert run["zero"] == pytest.approx(r["zero"], abs=0.01) and run["lost"] == pytest.approx(r["lost"], abs=0.01)


@pytest.mark.upstream
def test_07_powers_of_two_lose_digits_at_fp16_s_edges():
    v = np.float32(1.2345e-7)
    assert np.float32(np.float16(v)) != v and abs(float(np.float16(v)) - 1.19209e-7) < 1e-11
    assert abs(float(np.float32(np.float16(v * np.float32(2.0**10))) / 2.0**10) - 1.234e-7) < 1e-10
    with np.errstate(over="ignore"):
        assert np.isfinite(np.float16(40000.0)) and np.isinf(np.float16(40000.0) * np.float16(2.0))


@pytest.mark.upstream
def test_07_what_autocast_keeps_in_fp32_breaks_in_fp16():
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isinf(np.exp(np.float16(12.0))) and np.isfinite(np.exp(np.float16(11.0)))
        e = np.exp(np.array([12.0, 3.0, 1.0], dtype=np.float16))
        assert np.isnan((e / e.sum())[0])
        assert float(np.cumsum(np.ones(10_000, dtype=np.float16))[-1]) == 2048.0
        assert np.float16(2048.0) + np.float16(1.0) == np.float16(2048.0)
        # np.sum keeps a wider accumulator: three numbers, too few for pairs to matter, still reach 2050
        three = np.array([2048.0, 1.0, 1.0], dtype=np.float16)
        assert float(np.sum(three)) == 2050.0 and float(np.cumsum(three)[-1]) == 2048.0
        assert int(np.sum(np.ones(10_000, dtype=np.float16))) == 10_000
        f = np.array([300.0, -300.0, 250.0, -250.0], dtype=np.float16)
        assert np.isinf(np.mean(f * f)) and np.mean(f.astype(np.float64) ** 2) == 76250.0


@pytest.mark.upstream
def test_07_a_forward_activation_of_65536_overflows_fp16_not_bf16():
    with np.errstate(over="ignore"):
        assert 256 * 16.0 * 16.0 == 65536.0 and np.isinf(np.float16(65536.0))
    assert float(np.array(65536.0).astype(ml_dtypes.bfloat16)) == 65536.0


def test_07_unscale_once_per_optimizer_step_not_per_micro_batch():
    g = [np.array([0.5, -1.0]), np.array([1.5, 0.0]), np.array([-1.0, 2.0])]
    S = 2.0**10
    assert np.allclose(sum(S * x for x in g) / S, [1.0, 1.0])
    wrong = np.zeros(2)
    for x in g:
        wrong = (wrong + S * x) / S
    assert np.allclose(wrong, g[2] + g[1] / S + g[0] / S**2)
    assert np.allclose(np.round(wrong, 7), [-0.9985347, 1.999999])


def test_07_a_scaler_growing_every_4_steps_skips_every_fifth_step_from_88():
    """The companion's watched run."""
    text = _printed("watched_run = nb07.train(", COMPANION)
    assert "skipped steps: 23 of 200" in text and str(list(range(88, 200, 5))) in text
    # the arithmetic of the saw: 22 doublings after 4 clean steps each, from 2^16 to 2^38, reach step 88
    assert 16 + 88 // 4 == 38 and len(range(88, 200, 5)) == 23


@pytest.mark.upstream
def test_07_a_long_sum_stalls_at_256_in_bf16():
    b = ml_dtypes.bfloat16
    assert float(np.array(256.0, dtype=b) + np.array(1.0, dtype=b)) == 256.0
    assert float(np.array(255.0, dtype=b) + np.array(1.0, dtype=b)) == 256.0


def test_07_in_an_fp16_backward_the_parameter_gradients_that_survive_are_mostly_noise_unless_the_loss_is_scaled():
    """The companion's fp16 backward entry by entry: at scale 1 the nonzero parameter gradients have a median
    error of 200% against fp32 and 31% the wrong sign, built from dL/dlogits rounded to 0 or 1, 2, 3 × 2^-24; 79%
    of those a cast would zero are not 0. At 2^16: median error 1%, wrong signs 0% when rounded."""
    x, labels, ws = _start()
    _, _, reference = _forward_backward(ws, x, labels, np.dtype(np.float64), 1.0)
    reference = np.concatenate([g.ravel() for g in reference])
    cast_zeroes = np.abs(reference.astype(np.float32)) <= 2.0**-25
    assert round(100 * np.mean(reference.astype(np.float32).astype(F16) == 0), 1) == 31.7  # section 3's cast
    found = {}
    for scale in (1.0, 2.0**16):
        _, g3, grads = _forward_backward(ws, x, labels, F16, scale)
        grads = np.concatenate([g.ravel() for g in grads]).astype(np.float64) / scale
        kept = grads != 0
        error = np.median(np.abs(grads[kept] - reference[kept]) / np.abs(reference[kept]))
        wrong = np.mean(np.sign(grads[kept]) != np.sign(reference[kept]))
        found[scale] = (error, wrong, kept, g3)
    error, wrong, kept, g3 = found[1.0]
    assert round(100 * error) == 200 and round(100 * wrong) == 31
    multiples = np.unique(np.abs(g3[g3 != 0]).astype(np.float64)) / 2.0**-24
    assert list(multiples) == [1, 2, 3]  # rounded up from between 2^-25 and 2^-24, or to a small multiple
    assert round(100 * np.mean(kept[cast_zeroes])) == 79 and np.mean(kept == 0) < np.mean(cast_zeroes)
    error, wrong, _, _ = found[2.0**16]
    assert round(100 * error) == 1 and round(100 * wrong) == 0 and wrong > 0


def test_07_adam_moves_nearly_every_weight_whose_gradient_fp16_set_to_0():
    """The companion's closer look at the six runs: a zero gradient adds nothing new, but Adam's momentum still
    moves the weight (97%)."""
    share = _runs()["fp16, no loss scaling"]["zero moved"]
    assert round(100 * share) == 97
    # and the engine's run, whose line the companion stores (its output is not compared by nbval)
    text = _printed("unscaled_run = nb07.train(", COMPANION)
    assert "gradient entries exactly 0 that Adam moved all the same, fp16 without loss scaling: 97%" in text


def test_07_the_watched_run_reaches_92_percent_of_fp32_s_drop_skipping_one_step_in_growth_interval_plus_1():
    """The companion's watched run."""
    with np.errstate(over="ignore"):
        watched = _train(F16, dynamic=True, growth_interval=4)
    assert watched["skipped"] == 23
    assert round(100 * _drop(watched) / _drop(_runs()["fp32"])) == 92
    assert round((200 - 88) / 23) == 4 + 1


@pytest.mark.upstream
def test_07_a_sequential_fp16_sum_stalls_at_2048_on_a_tie_rounded_to_even_a_pairwise_sum_does_not():
    """The companion's fp32 list: 'at least twice': 2048 + 1 is a tie and rounds to even; np.sum reaches 10000."""
    ones = np.ones(10_000, dtype=np.float16)
    assert float(np.cumsum(ones)[-1]) == 2048.0 and float(np.sum(ones)) == 10_000.0
    assert float(np.float16(2048) + np.float16(1)) == 2048.0  # halfway between 2048 and 2050: to even
    assert float(np.float16(2050) + np.float16(1)) == 2052.0  # halfway again: to even, which is up here


@pytest.mark.upstream
def test_07_autocast_s_float32_list_differs_by_device_on_the_cpu_softmax_layer_norm_and_sum_keep_their_input_s_dtype():
    """The companion's fp32 list: on the CPU, softmax, layer norm and sums run in the dtype that reaches them
    (bf16 after a matrix product, fp32 on fp32); the cross-entropy loss is cast to fp32."""
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ torch.randn(8, 8)
        assert y.dtype == torch.bfloat16
        for out in (torch.softmax(y, -1), torch.log_softmax(y, -1), torch.nn.functional.layer_norm(y, (8,)),
                    y.sum(), y.mean()):
            assert out.dtype == torch.bfloat16
        assert torch.nn.functional.cross_entropy(y, torch.tensor([0, 1, 2, 3])).dtype == torch.float32
        for out in (torch.softmax(x, -1), torch.nn.functional.layer_norm(x, (8,)), x.sum()):
            assert out.dtype == torch.float32       # an fp32 input stays fp32: not cast down, not on a list


@pytest.mark.upstream
def test_07_grad_scaler_refuses_a_second_unscale_before_update():
    """The companion's gradient accumulation: a second scaler.unscale_(optimizer) before scaler.update() raises
    a RuntimeError."""
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    scaler.scale((p * 2).sum()).backward()
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError):
        scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    scaler.scale((p * 2).sum()).backward()
    scaler.unscale_(optimizer)  # after update(), once again allowed


# --- the companion: TF32, and bf16 weights without fp32 masters --------------------------------------------------


def _tf32(values):
    """fp32 values to 11 significant bits (TF32's 10 fraction bits), ties to even, by frexp: not by bit patterns."""
    mantissa, exponent = np.frexp(np.asarray(values, dtype=np.float64))
    return np.ldexp(np.rint(mantissa * 2.0**11) / 2.0**11, exponent)


def test_07_tf32_keeps_10_fraction_bits_and_its_products_err_like_fp16_s():
    assert list(_tf32([1 + 2**-11, 1 + 3 * 2**-11])) == [1.0, 1 + 2**-9]
    text = _printed("def tf32(values)", COMPANION)
    assert "tensorfloat32     19  3.40116e+38           2^-126    2^-10" in text
    assert "in TF32: [1.0, 1.001953125, 0.0999755859375]" in text
    assert float(np.float32(3.40116e38)) == pytest.approx((2 - 2**-10) * 2.0**127, rel=1e-5)
    x, labels, ws = _start()
    h1 = np.tanh(x.astype(np.float32) @ ws[0] + ws[1]).astype(np.float64)
    w2 = ws[2].astype(np.float64)
    exact = h1 @ w2
    error = lambda p: float(np.median(np.abs(p - exact) / np.abs(exact)))  # noqa: E731
    tf32, fp16 = error(_tf32(h1) @ _tf32(w2)), error(h1.astype(F16).astype(np.float64) @ w2.astype(F16).astype(np.float64))
    bf16 = error(h1.astype(BF16).astype(np.float64) @ w2.astype(BF16).astype(np.float64))
    assert 0.5e-4 <= tf32 < 1.5e-4 and tf32 == pytest.approx(fp16, rel=1e-9)  # "about 1e-4, the same as fp16's"
    assert 0.5e-3 <= bf16 < 1.5e-3 and error(exact.astype(np.float32)) < 5e-8
    for name, figure in (("TF32", "1e-04"), ("fp16", "1e-04"), ("bf16", "1e-03"), ("fp32, result", "2e-08")):
        assert re.search(rf"{re.escape(name)}.*median relative error {figure}", text), name


@pytest.mark.upstream
def test_07_pytorch_keeps_fp32_matrix_products_in_fp32_by_default_and_lets_cudnn_use_tf32():
    torch = pytest.importorskip("torch")
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is True


@lru_cache(maxsize=1)
def _no_master_runs():
    return {"fp32": _train(np.dtype(np.float32)), "master": _train(BF16), "nearest": _train(BF16, keep_master=False),
            "stochastic": _train(BF16, keep_master=False, rounding="stochastic"),
            "compensated": _train(BF16, keep_master=False, rounding="compensated")}


def test_07_stochastic_rounding_and_compensation_recover_what_bf16_without_masters_loses():
    runs = _no_master_runs()
    share = {name: _drop(r) / _drop(runs["fp32"]) for name, r in runs.items()}
    assert share["nearest"] < 0.15 and runs["nearest"]["lost"] > 0.85
    assert abs(share["stochastic"] - 1) < 0.05 and abs(share["compensated"] - 1) < 0.05
    assert abs(share["compensated"] - share["master"]) < 0.01
    # most single updates still do not show right after their step, yet they are not lost
    assert runs["stochastic"]["lost"] > 0.8 and runs["compensated"]["lost"] > 0.8

    def off(run):  # how far a run's weights end from fp32's, as a share of how far fp32's moved
        distance = lambda a, b: np.sqrt(sum(np.sum((u - v.astype(np.float64)) ** 2) for u, v in zip(a, b)))  # noqa: E731
        return distance(run["weights"], runs["fp32"]["weights"]) / distance(runs["fp32"]["weights"], _start()[2])
    assert off(runs["master"]) < 0.06 and off(runs["compensated"]) < 0.08
    assert 0.15 < off(runs["stochastic"]) < 0.5 and off(runs["nearest"]) > 0.9
    text = _printed("bf16_runs = {", COMPANION)
    assert re.search(r"bf16, rounded to nearest\s+2\s+7%\s+94%\s+96%", text)
    verdicts = _printed("shares = {name: drop_share", COMPANION)
    assert verdicts.count(": True") == 2


def _autocast_rows(text):
    """{(autocast at forward, at backward, decorated): (forward format, backward format)} from the stored table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"(on|off) / (on|off)\s+(yes|no)\s+(\w+)\s+(\w+)\s+(True|False)$", line)
        if m:
            rows[(m[1] == "on", m[2] == "on", m[3] == "yes")] = (m[4], m[5])
            assert (m[4] == m[5]) == (m[6] == "True")
    return rows


def test_07_custom_bwd_runs_a_custom_backward_in_its_forward_s_autocast_state_without_it_the_caller_s():
    """Recomputed with a Function of its own (NumPy formats read from the engine's products), and set beside the
    companion's stored table: without the decorators the backward takes the state where .backward() is called."""
    from haaw import Function, Tensor, amp

    def formats(decorated, forward_in, backward_in):
        seen = []
        wrap_f = amp.custom_fwd if decorated else (lambda f: f)
        wrap_b = amp.custom_bwd if decorated else (lambda f: f)

        class Product(Function):
            @staticmethod
            @wrap_f
            def forward(ctx, a, b):
                ctx.a, ctx.b = a, b
                seen.append((Tensor(a) @ Tensor(b)).data.dtype.name)
                return (Tensor(a) @ Tensor(b)).data

            @staticmethod
            @wrap_b
            def backward(ctx, g):
                da = (Tensor(g) @ Tensor(ctx.b).T).data
                seen.append(da.dtype.name)
                return da, (Tensor(ctx.a).T @ Tensor(g)).data

        a = Tensor(np.ones((2, 3), np.float32), requires_grad=True)
        with amp.autocast(dtype="bfloat16", enabled=forward_in):
            out = Product.apply(a, Tensor(np.ones((3, 2), np.float32)))
        with amp.autocast(dtype="bfloat16", enabled=backward_in):
            out.sum().backward()
        return tuple(seen)

    stored = _autocast_rows(_printed("def formats_of(", COMPANION))
    assert len(stored) == 4
    for (forward_in, backward_in, decorated), pair in stored.items():
        assert formats(decorated, forward_in, backward_in) == pair
        forward_format = "bfloat16" if forward_in else "float32"
        called_format = "bfloat16" if backward_in else "float32"
        assert pair == (forward_format, forward_format if decorated else called_format)
    text = _printed("def formats_of(", COMPANION)
    assert ("cast_inputs=float32, bf16 inputs, autocast on: forward in float32, backward in float32, "
            "the inputs' gradients in bfloat16") in text


@pytest.mark.upstream
def test_07_pytorch_s_custom_bwd_restores_the_forward_s_autocast_state_and_cast_inputs_turns_it_off():
    torch = pytest.importorskip("torch")
    seen = []

    class Product(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu")
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            seen.append((g @ b.T).dtype)
            return g @ b.T, a.T @ g

    for forward_in in (True, False):
        a = torch.ones(2, 3, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=forward_in):
            out = Product.apply(a, torch.ones(3, 2))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=not forward_in):
            out.sum().backward()
        assert seen.pop() == (torch.bfloat16 if forward_in else torch.float32)
        assert a.grad.dtype == torch.float32
    text = _printed("class TorchMatmul", COMPANION)
    if "not installed" not in text:
        assert text.count("the same as haaw's: True") == 2
