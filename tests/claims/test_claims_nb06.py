"""The claims of notebook 06: each figure or causal claim the notebook states, asserted.

The stacks and chains here are built again from scratch, not taken from the notebook or from
``nb06.measure``, so that a change to either cannot make its own claim pass."""
import re

import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import checkpoint, Function, no_grad, Tensor
from haaw.course.exercises import check, pick
from haaw.course.exercises.nb06 import _KeepsTheOutput, CheckpointSegment
from haaw.course.nb06 import GPT_125M, LLAMA_7B, MODEL_7B, training_memory
from haaw.nn import Linear
from haaw.tools.flops import count_flops
from haaw.tools.memory import track_memory


def _stack(depth, width, seed=0):
    blocks, layers = [], []
    for i in range(depth):
        up, down = Linear(width, 4 * width, seed=seed + 2 * i), Linear(4 * width, width, seed=seed + 2 * i + 1)
        blocks.append(lambda h, up=up, down=down: h + down(F.gelu(up(F.layer_norm(h, h.shape[-1:])))))
        layers += [up, down]
    return blocks, layers


def _step(blocks, x0, segment, keep=checkpoint):
    def run(h, chunk):
        for block in chunk:
            h = block(h)
        return h

    x = h = Tensor(x0, requires_grad=True)
    if segment is None:
        h = run(h, blocks)
    else:
        for start in range(0, len(blocks), segment):
            h = keep(lambda t, chunk=blocks[start:start + segment]: run(t, chunk), h)
    (h * h).mean().backward()
    return x


def _measure(segment, depth=16, width=64, batch=64):
    blocks, _ = _stack(depth, width)
    x0 = np.random.default_rng(1).standard_normal((batch, width))
    with track_memory() as memory, count_flops() as flops:
        _step(blocks, x0, segment)
    return memory.peak, flops.total_forward, flops.total_backward, flops.total_recompute


def test_06_checkpointing_every_block_keeps_9_percent_for_34_percent_more_flops_and_k_1_is_best():
    plain_peak, forward, backward, recompute = _measure(None)
    assert recompute == 0 and 1.9 < backward / forward < 2.0  # "a little under two forwards"
    peaks = {}
    for k in (1, 2, 4, 8, 16):
        peak, _, _, extra = _measure(k)
        peaks[k] = peak
        assert round(100 * extra / (forward + backward)) == 34  # the same whatever k is
    assert round(100 * peaks[1] / plain_peak) == 9
    assert min(peaks, key=peaks.get) == 1  # not √16 = 4: a block keeps far more than its input
    assert [peaks[k] for k in (1, 2, 4, 8, 16)] == sorted(peaks.values())


def test_06_the_learner_s_checkpoint_class_gives_identical_gradients_and_keeps_fewer_bytes():
    class Mine(CheckpointSegment):
        pass

    assert check("06-checkpoint", Mine).correct and pick("06-checkpoint", Mine) is Mine
    blocks, layers = _stack(6, 16, seed=3)
    x0 = np.random.default_rng(4).standard_normal((8, 16))

    def run(segment, keep=checkpoint):
        for layer in layers:
            layer.zero_grad()
        with track_memory() as memory:
            x = _step(blocks, x0, segment, keep)
        return [x.grad] + [p.grad.copy() for layer in layers for p in layer.parameters()], memory.peak

    plain, plain_peak = run(None)
    mine, mine_peak = run(1, Mine.apply)
    engine, engine_peak = run(1)
    assert all(np.array_equal(a, b) for a, b in zip(mine, plain))
    assert all(np.array_equal(a, b) for a, b in zip(engine, plain))
    assert mine_peak == engine_peak < 0.3 * plain_peak


def _chain_peak(N, k, n=500):
    x = Tensor(np.random.default_rng(0).standard_normal(n), requires_grad=True)

    def layers(h, m):
        for _ in range(m):
            h = h.tanh()
        return h

    with track_memory() as memory:
        h = x
        if k is None:
            h = layers(h, N)
        else:
            for start in range(0, N, k):
                h = checkpoint(lambda t, m=min(k, N - start): layers(t, m), h)  # noqa: B008 (binds this segment's size)
        h.sum().backward()
    return memory.peak / x.data.nbytes


def test_06_a_chain_of_100_keeps_n_over_k_plus_k_arrays_less_its_input_smallest_at_the_square_root():
    assert _chain_peak(100, None) == 100
    peaks = {k: _chain_peak(100, k) for k in (2, 4, 5, 10, 20, 25, 50)}
    for k, peak in peaks.items():
        assert peak == 100 // k + k - 1  # the first checkpoint is the chain's input: not counted
    assert min(peaks, key=peaks.get) == 10
    assert check("06-sqrt", 100 // 10 + 10).correct


def test_06_the_memory_calculator_16_bytes_a_parameter_and_the_layer_being_recomputed():
    for shape in (GPT_125M, MODEL_7B):
        for precision in ("fp32", "mixed"):
            parts = training_memory(shape, 1, 1024, precision=precision)
            assert (parts["weights"] + parts["gradients"] + parts["optimizer state"]) / shape.params == 16
    parts = training_memory(MODEL_7B, 1, 4096, precision="mixed")
    assert round((parts["weights"] + parts["gradients"] + parts["optimizer state"]) / 2**30) == 100
    # Korthikanti et al.'s per-layer count, summed by hand: 4 (LayerNorms) + 11 (attention) + 19 (MLP)
    s, b, h, a, L = 4096, 1, 4096, 32, 32
    per_layer = (4 + 11 + 19) * s * b * h + 5 * a * s * s * b
    assert parts["activations"] == pytest.approx(L * per_layer) and round(parts["activations"] / 2**30) == 97
    # recomputation: every layer's input, plus the last layer's activations again (less its input)
    again = training_memory(MODEL_7B, 1, 4096, precision="mixed", recompute=True)
    assert again["activations"] == L * 2 * s * b * h
    assert again["recomputed layer"] == pytest.approx(per_layer - 2 * s * b * h)
    assert round(again["activations"] / 2**30, 1) == 1.0 and round(again["recomputed layer"] / 2**30, 1) == 3.0
    assert again["recomputed layer"] > 2 * again["activations"]  # leaving it out understated the peak
    fp32 = training_memory(MODEL_7B, 1, 4096, precision="fp32", recompute=True)
    # in fp32 the 2-byte numbers take 4 bytes, the two 1-byte dropout masks (and the scores' mask) do not
    per_layer_fp32 = (2 * (4 + 10 + 18) + 2) * s * b * h + (2 * 2 * 2 + 1) * a * s * s * b
    assert fp32["activations"] == L * 4 * s * b * h
    assert fp32["recomputed layer"] == pytest.approx(per_layer_fp32 - 4 * s * b * h)
    assert fp32["recomputed layer"] < 2 * again["recomputed layer"]  # not everything doubles
    assert training_memory(MODEL_7B, 1, 4096, precision="fp32")["activations"] == pytest.approx(L * per_layer_fp32)
    # the notebook's fp32 formula s·b·h·(66 + 9·a·s/h)
    assert per_layer_fp32 == pytest.approx(s * b * h * (66 + 9 * a * s / h))
    # what the calculator leaves out: 125M's logits at 8 × 1024 tokens, 1.53 GiB in fp32, about as much as
    # the checkpoints and the recomputed layer together
    logits = 8 * 1024 * 50_257 * 4
    assert f"{logits / 2**30:.2f}" == "1.53"
    small = training_memory(GPT_125M, 8, 1024, precision="fp32", recompute=True)
    assert abs(logits / (small["activations"] + small["recomputed layer"]) - 1) < 0.05
    assert training_memory(MODEL_7B, 1, 4096)["recomputed layer"] == 0


def test_06_stored_scores_make_activations_quadratic_in_sequence_length_82_percent_at_4096():
    def act(seq, keep_scores=True):
        return training_memory(MODEL_7B, 1, seq, precision="mixed", keep_scores=keep_scores)["activations"]

    scores = 5 * MODEL_7B.heads * 4096 / MODEL_7B.hidden
    assert round(100 * scores / (34 + scores)) == 82
    assert round(act(4096) / 2**30) == 97 and round(act(4096, keep_scores=False) / 2**30) == 17
    assert act(8192, False) == 2 * act(4096, False)  # linear without the scores
    assert act(8192) / act(4096) > 3.5  # nearly 4×: quadratic once the scores dominate
    assert training_memory(MODEL_7B, 2, 2048, precision="mixed")["activations"] == 2 * act(2048)  # linear in b


def test_06_the_checkpoint_class_gives_the_weights_inside_their_gradient_when_its_input_needs_none():
    layer = Linear(3, 2, seed=5)
    x0 = np.random.default_rng(6).standard_normal((4, 3))
    layer(Tensor(x0)).tanh().sum().backward()
    expected = layer.weight.grad.copy()
    layer.zero_grad()
    CheckpointSegment.apply(lambda h: layer(h).tanh(), Tensor(x0)).sum().backward()
    assert np.array_equal(layer.weight.grad, expected)


def _learner_checkpoint(keep_x, keep_more=lambda out: {}):
    """A learner's checkpointed segment: forward runs fn without recording, keeps ``keep_x(x)`` and whatever
    ``keep_more(out)`` names on ctx; backward runs fn again from the kept input."""
    class Segment(Function):
        always_record = True

        @staticmethod
        def forward(ctx, fn, x):
            with no_grad():
                out = fn(Tensor(x))
            ctx.fn, ctx.x = fn, keep_x(x)
            for name, value in keep_more(out).items():
                setattr(ctx, name, value)
            return out.data

        @staticmethod
        def backward(ctx, g):
            x = Tensor(ctx.x, requires_grad=True)
            ctx.fn(x).backward(g)
            return None, x.grad
    return Segment


def test_06_a_copy_of_the_input_is_a_correct_checkpoint_but_keeping_the_output_is_not():
    assert check("06-checkpoint", _learner_checkpoint(lambda x: x.copy())).correct
    assert not check("06-checkpoint", _KeepsTheOutput).correct


def test_06_keeping_the_output_is_named_whether_as_its_array_or_as_the_tensor_so_pick_runs_the_course_s():
    # the memory tracker counts bare arrays on ctx; a Tensor on ctx (ctx.out = out) keeps out.data alive all
    # the same, and must not pass: else the core's cell that runs the learner's class would print a peak that misses
    # the output

    for what in (lambda out: out, lambda out: out.data, lambda out: (out,), lambda out: {"y": out}):
        cls = _learner_checkpoint(lambda x: x, lambda out, what=what: {"out": what(out)})
        feedback = check("06-checkpoint", cls)
        assert not feedback.correct and "keeping the output as well" in feedback.message
        assert pick("06-checkpoint", cls) is CheckpointSegment


def test_06_gpt2_small_s_activations_outweigh_everything_else_linear_in_batch_3_4_times_for_twice_the_tokens():
    """Core, cell 0 and section 2: for a large model trained on long sequences the activations outweigh everything
    else in memory; weights, gradients and optimizer state take 1.86 GiB whatever the data; the activations grow in
    proportion to the batch, and twice the tokens give 3.4 times the bytes (the s × s score matrices)."""
    def parts(batch, seq):
        return training_memory(GPT_125M, batch, seq, precision="fp32")

    fixed = parts(8, 1024)["weights"] + parts(8, 1024)["gradients"] + parts(8, 1024)["optimizer state"]
    assert f"{fixed / 2**30:.2f}" == "1.86" and fixed == 16 * GPT_125M.params
    assert parts(8, 1024)["activations"] > 5 * fixed  # several times everything else
    assert parts(16, 1024)["activations"] == 2 * parts(8, 1024)["activations"]
    growth = parts(8, 2048)["activations"] / parts(8, 1024)["activations"]
    assert f"{growth:.1f}" == "3.4" and growth > 2  # faster than the sequence length: the scores


def test_06_a_7b_model_needs_about_100_gib_before_a_single_activation_and_its_activations_as_much_again():
    """Companion, "Two 7B models": about 100 GiB for weights, gradients and optimizer state; GPT-3 6.7B's
    activations at 4096 tokens in mixed precision, 97 GiB, about as much again."""
    parts = training_memory(MODEL_7B, 1, 4096, precision="mixed")
    fixed = parts["weights"] + parts["gradients"] + parts["optimizer state"]
    assert 0.9 < parts["activations"] / fixed < 1.1
    assert round(parts["activations"] / 2**30) == 97 and round(fixed / 2**30) == 100


def test_06_the_labels_are_counted_cross_entropy_keeps_its_log_probabilities_and_a_copy_of_the_labels():
    """Core, section 1: parameters and the input batch are not counted; cross-entropy keeps 32 × 10
    log-probabilities and a copy of the 32 labels, 8 bytes each, in the cross_entropy_rows row."""
    from haaw.nn import MLP
    rng = np.random.default_rng(0)
    model = MLP([64, 128, 128, 10], seed=0)
    x = Tensor(rng.standard_normal((32, 64)))
    with track_memory() as memory:
        F.cross_entropy(model(x), rng.integers(0, 10, 32)).backward()
    assert memory.by_op["cross_entropy_rows"][1] == 32 * 10 * 8 + 32 * 8 == 2_816
    assert memory.by_op["linear"][1] == 2 * 32 * 128 * 8  # the two hidden layers only: no parameter, no input batch


def test_06_at_4096_tokens_dropping_the_scores_saves_nearly_as_much_as_checkpointing_and_the_two_combine():
    """Companion, "Long sequences and the score matrices": 97.0 -> 17.0 GiB without scores; 1.0 + 3.0 with
    recomputation; 1.5 with both."""
    s, b, h, a, L = 4096, 1, 4096, 32, 32
    per_layer = 34 * s * b * h + 5 * a * s * s * b  # Korthikanti et al., 16-bit
    no_scores = 34 * s * b * h
    stored, without = L * per_layer, L * no_scores
    checkpoints = L * 2 * s * b * h
    recomputed, recomputed_no_scores = per_layer - 2 * s * b * h, no_scores - 2 * s * b * h
    gib = lambda v: round(v / 2**30, 1)  # noqa: E731
    assert (gib(stored), gib(without), gib(checkpoints), gib(recomputed)) == (97.0, 17.0, 1.0, 3.0)
    assert gib(checkpoints + recomputed_no_scores) == 1.5
    # "nearly as much": dropping the scores saves 80 GiB, checkpointing 93
    assert 0.8 < (stored - without) / (stored - checkpoints - recomputed) < 1
    assert checkpoints + recomputed_no_scores < min(without, checkpoints + recomputed)  # they combine
    for keep_scores, recompute, expected in ((True, False, stored), (False, False, without),
                                             (True, True, checkpoints + recomputed),
                                             (False, True, checkpoints + recomputed_no_scores)):
        parts = training_memory(MODEL_7B, 1, 4096, precision="mixed", recompute=recompute, keep_scores=keep_scores)
        assert parts["activations"] + parts["recomputed layer"] == pytest.approx(expected)


def test_06_a_block_keeps_about_30_arrays_its_input_s_size_so_segments_of_one_block_win():
    """Companion, "The best segment length": one block keeps ~30 input-sized arrays; N/k + 30·k (less the input)
    predicts the peaks, smallest at k = √(16/30) < 1."""
    input_bytes = 64 * 64 * 8
    plain_peak = _measure(None)[0]
    per_block = plain_peak / 16 / input_bytes
    assert round(per_block) == 30 and f"{per_block:.1f}" == "30.1"
    assert np.sqrt(16 / per_block) < 1
    for k in (1, 2, 4):
        measured = _measure(k)[0] / input_bytes
        assert abs(measured - (16 // k - 1 + 30 * k)) < 0.5


def test_06_without_dropout_a_llama_style_7b_keeps_about_half_of_gpt3_s_activations_but_more_once_scores_are_gone():
    """Companion, "What a transformer layer keeps" and "Two 7B models": a LLaMA-style layer keeps
    s·b·h·(37.5 + 2·a·s/h) bytes in 16-bit against GPT-3's 34 + 5·a·s/h; at 4096 tokens in mixed precision
    50.8 GiB against 97.0; with no score matrix stored and every layer checkpointed, 1.6 against 1.5."""
    s, b, h, a = 4096, 1, 4096, 32

    def activations(shape, **kw):
        parts = training_memory(shape, b, s, precision="mixed", **kw)
        return parts["activations"] + parts["recomputed layer"]

    per_entry = activations(LLAMA_7B, keep_scores=False) / (LLAMA_7B.layers * s * b * h)
    assert per_entry == pytest.approx(37.5)
    assert (activations(LLAMA_7B) / (LLAMA_7B.layers * s * b * h) - per_entry) / (a * s / h) == pytest.approx(2)
    llama, gpt = activations(LLAMA_7B) / 2**30, activations(MODEL_7B) / 2**30
    assert (f"{llama:.1f}", f"{gpt:.1f}") == ("50.8", "97.0") and 0.45 < llama / gpt < 0.55  # "about half"
    both = {shape.name: activations(shape, keep_scores=False, recompute=True) / 2**30 for shape in (LLAMA_7B, MODEL_7B)}
    assert [f"{v:.1f}" for v in both.values()] == ["1.6", "1.5"]
    # what makes the difference once the scores are gone: the wider SwiGLU network against the two dropout masks
    assert activations(LLAMA_7B, keep_scores=False) > activations(MODEL_7B, keep_scores=False)


def test_06_the_time_story_s_stacks_recompute_34_percent_of_their_flops_whatever_their_size():
    """Companion, "The time taken apart": the three stacks (16 wide and batch 16, the core's 64 and 64, batch 256)
    keep 0.9, 15.0 and 60.2 MiB; their time varies with size and machine, their recomputed FLOPs do not: 34% of
    a plain step each. And the counter charges an entry of tanh one FLOP, as it does an addition."""
    kept = []
    for width, batch in ((16, 16), (64, 64), (64, 256)):
        blocks, _ = _stack(16, width)
        x0 = np.random.default_rng(1).standard_normal((batch, width))
        with track_memory() as memory, count_flops() as plain:
            _step(blocks, x0, None)
        with count_flops() as every:
            _step(blocks, x0, 1)
        kept.append(f"{memory.peak / 2**20:.1f}")
        assert round(100 * every.total_recompute / (plain.total_forward + plain.total_backward)) == 34
    assert kept == ["0.9", "15.0", "60.2"]
    z = Tensor(np.ones((4, 8)))
    with count_flops() as flops:
        z.tanh()
        z + z
    assert flops.forward["tanh"] == flops.forward["add"] == 32


def test_06_no_output_nbval_compares_depends_on_a_timing():
    """The notebooks print times as what one run measured: every cell that times anything is one whose output
    nbval does not compare, in the core and in its companion."""
    nbformat = pytest.importorskip("nbformat")
    from pathlib import Path

    notebooks = Path(__file__).resolve().parents[2] / "notebooks"
    paths = sorted(notebooks.glob("06_*.ipynb")) + sorted(notebooks.glob("deeper/06_*.ipynb"))
    assert len(paths) == 2
    timed = 0
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and any(w in cell.source for w in ("time_in_turns", "thread_time", "perf_counter")):
                timed += 1
                assert "nbval-ignore-output" in cell.metadata.get("tags", []), (path.name, cell.source[:80])
    assert timed >= 3


def _companion_lines(stored_output, source):
    return {line.split()[0] + (" + full" if "+ full" in line else ""): line
            for line in stored_output("06", source).splitlines() if line.strip()}


def test_06_selective_checkpointing_recomputes_all_but_the_matrix_products_and_keeps_their_results(stored_output):
    """Recomputed here with the core's stack: selective recomputation is full recomputation less its linear layers'
    FLOPs, with the same gradients; the peak grows by the kept results of the 32 linear layers, less at most one
    block's (the block being recomputed at the peak reuses its kept results instead of making new ones)."""
    from functools import partial

    from haaw.course import nb06

    blocks, _ = nb06.make_stack()
    x0 = np.random.default_rng(1).standard_normal((64, 64))
    runs = {}
    for name, keep in (("none", None), ("full", checkpoint), ("selective", partial(checkpoint, save=("linear",)))):
        with track_memory() as memory, count_flops() as flops:
            x = nb06.run_stack(blocks, x0, None if keep is None else 1, keep=keep or checkpoint)
        runs[name] = (memory.peak, dict(flops.recompute), flops.total_forward + flops.total_backward, x.grad)
    full, selective = runs["full"][1], runs["selective"][1]
    assert sum(selective.values()) == sum(full.values()) - full["linear"] and "linear" not in selective
    assert np.array_equal(runs["selective"][3], runs["none"][3]) and np.array_equal(runs["full"][3], runs["none"][3])
    kept_per_block = (64 * 256 + 64 * 64) * 8
    assert 16 * kept_per_block - kept_per_block <= runs["selective"][0] - runs["full"][0] <= 16 * kept_per_block
    lines = _companion_lines(stored_output, "ways = {")
    for name, (peak, recompute, plain, _) in runs.items():
        assert f"{peak / 2**20:5.2f} MiB, recomputed {sum(recompute.values()) / plain:6.1%}" in lines[name]
        assert lines[name].endswith("gradient the same as none's: True")
    assert runs["selective"][0] / runs["none"][0] == pytest.approx(0.25, abs=0.01)  # "a quarter"
    assert 25 <= sum(full.values()) / sum(selective.values()) <= 35                   # "about a thirtieth"


def test_06_offloading_keeps_nothing_on_the_accelerator_and_moves_each_save_once(stored_output):
    lines = _companion_lines(stored_output, "def pack(array)")
    offloaded = re.search(r"peak kept for backward\s+([\d.]+) MiB, recomputed\s+([\d.]+)%,\s+([\d.]+) MiB to the host "
                          r"and\s+([\d.]+) MiB back, gradient the same: True", lines["offloaded"]).groups()
    assert offloaded[:2] == ("0.00", "0.0") and offloaded[2] == offloaded[3] and float(offloaded[2]) > 15.05
    both = re.search(r"peak kept for backward\s+([\d.]+) MiB, recomputed\s+([\d.]+)%,\s+([\d.]+) MiB to the host",
                     lines["offloaded + full"]).groups()
    inputs = 16 * 64 * 64 * 8 / 2**20                                   # the 16 blocks' inputs: 0.5 MiB
    assert inputs <= float(both[2]) <= inputs + 3 * 64 * 64 * 8 / 2**20  # and the loss's few saves
    assert both[1] == "33.6" and 0 < float(both[0]) < 1.41
    assert "the most one operation saves: 0.12 MiB" in stored_output("06", "def pack(array)")
    link = re.search(r"each way: offloaded ([\d.]+) ms, offloaded \+ full ([\d.]+) ms",
                     stored_output("06", "def pack(array)")).groups()
    assert float(link[0]) == pytest.approx(float(offloaded[2]) * 2**20 / 25e9 * 1e3, abs=0.006)  # 25 GB/s
    assert float(link[1]) == pytest.approx(float(both[2]) * 2**20 / 25e9 * 1e3, abs=0.006)
    assert 64 * 256 * 8 / 2**20 == pytest.approx(0.125)                # one hidden layer's array, 64 × 256


@pytest.mark.upstream
def test_06_pytorch_packs_an_array_once_for_each_save_as_haaw_does():
    """06+: "an array that two operations save ... is packed once for each save (PyTorch's save_on_cpu does the
    same)": save_on_cpu is a pair of saved-tensor hooks, and PyTorch calls pack for every save."""
    torch = pytest.importorskip("torch")
    from haaw import saved_tensors_hooks

    packed = {"torch": 0, "haaw": 0}
    x = torch.ones(3, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (packed.__setitem__("torch", packed["torch"] + 1), t)[1],
                                                  lambda t: t):
        y = x.tanh()
        y * y  # tanh keeps y; the product keeps y twice
    hx = Tensor(np.ones(3), requires_grad=True)
    with saved_tensors_hooks(lambda a: (packed.__setitem__("haaw", packed["haaw"] + 1), a)[1], lambda a: a):
        hy = hx.tanh()
        hy * hy
    assert packed["torch"] == packed["haaw"] == 3
