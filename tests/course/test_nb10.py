"""The capstone's model: tokenizer, training, generation, one step against torch, the glossary quiz."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw.course.nb10 import GLOSSARY, TERMS, quiz_feedback
from haaw.optim import Adam
from haaw.course.nb10 import CharTokenizer, TinyGPT, generate, load_story, random_batch, tiny_gpt_in_torch

STORY = load_story()
TOKENIZER = CharTokenizer(STORY)
DATA = TOKENIZER.encode(STORY)


def test_the_story_ships_with_the_package_and_round_trips():
    assert len(STORY) > 1500 and len(TOKENIZER) == 31
    assert TOKENIZER.decode(TOKENIZER.encode("the loss")) == "the loss"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        TOKENIZER.encode("THE")


def test_batches_are_windows_and_their_next_characters():
    x, y = random_batch(DATA, 3, 8, np.random.default_rng(0))
    assert x.shape == y.shape == (3, 8)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])


def test_a_few_adam_steps_lower_the_loss_from_ln_31():
    model = TinyGPT(len(TOKENIZER), dim=16, heads=2, layers=1, context=16, seed=0)
    optimizer = Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(30):
        x, y = random_batch(DATA, 8, 16, rng)
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(np.log(31), abs=0.3)  # near "knowing nothing"
    assert np.mean(losses[-5:]) < losses[0] - 0.5


def test_generation_is_seeded_and_respects_the_context():
    model = TinyGPT(len(TOKENIZER), context=8, seed=0)
    a, b = generate(model, TOKENIZER, "the ", 20, seed=3), generate(model, TOKENIZER, "the ", 20, seed=3)
    assert a == b and a.startswith("the ") and len(a) == 24
    with pytest.raises(ValueError, match="the context is 8"):
        model(np.zeros((1, 9), dtype=int))


def test_one_training_step_matches_torch_for_all_38_parameters():
    torch = pytest.importorskip("torch")
    model = TinyGPT(len(TOKENIZER), seed=1)
    x, y = random_batch(DATA, 4, 16, np.random.default_rng(1))
    loss = F.cross_entropy(model(x).reshape(-1, len(TOKENIZER)), y.reshape(-1))
    loss.backward()
    logits, P = tiny_gpt_in_torch(model, x, torch)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, len(TOKENIZER)), torch.as_tensor(y.reshape(-1)))
    ref.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    assert len(P) == len(model.parameters()) == 38
    for p in model.parameters():
        np.testing.assert_allclose(p.grad, P[id(p)].grad.numpy(), rtol=1e-9, atol=1e-12)


def test_the_glossary_quiz_marks_right_wrong_and_missing_answers():
    answers = {i: term for i, (term, _) in enumerate(GLOSSARY)}
    assert quiz_feedback(answers)[0] == len(GLOSSARY)
    answers[0], answers[1] = "optimizer", "?"
    right, lines = quiz_feedback(answers)
    assert right == len(GLOSSARY) - 2
    assert lines[0].startswith("✗ 'optimizer' is what turns gradients")
    assert lines[1].startswith("· not answered")
    assert len(TERMS) == len(set(TERMS)) == len(GLOSSARY)


# --- the recipe of switches (notebook 10's companion) ---------------------------------------------------------
from haaw.course import nb10  # noqa: E402


def test_the_learning_rate_is_constant_without_warmup_and_reaches_zero_at_the_end_with_it():
    assert [nb10.Recipe(lr=0.01).learning_rate(s) for s in (0, 50, 1000)] == [0.01] * 3
    recipe = nb10.Recipe(lr=0.01, warmup=4, steps=20)
    assert recipe.learning_rate(0) == pytest.approx(0.0025) and recipe.learning_rate(3) == pytest.approx(0.01)
    assert recipe.learning_rate(20) == pytest.approx(0.0, abs=1e-15)
    assert recipe.learning_rate(99) == pytest.approx(0.0, abs=1e-15)


def test_a_floor_stops_the_half_cosine_at_its_share_of_the_peak_and_leaves_the_warmup_alone():
    plain, floored = nb10.Recipe(lr=0.01, warmup=4, steps=20), nb10.Recipe(lr=0.01, warmup=4, steps=20, floor=0.1)
    assert [floored.learning_rate(s) for s in range(5)] == [plain.learning_rate(s) for s in range(5)]
    assert floored.learning_rate(20) == floored.learning_rate(99) == pytest.approx(0.001, rel=1e-12)
    for s in range(4, 20):
        assert floored.learning_rate(s) == pytest.approx(0.001 + 0.9 * plain.learning_rate(s), rel=1e-12)
    # no floor: the rate the notebooks printed before floors existed, to the last bit
    assert [plain.learning_rate(s) for s in range(25)] == [
        0.01 * (s + 1) / 4 if s < 4 else 0.01 * 0.5 * (1 + np.cos(np.pi * min(1.0, (s - 4) / 16))) for s in range(25)]


def test_the_trainer_s_dynamic_scaler_skips_overflowing_steps_halving_the_scale_and_then_trains():
    """The rule of notebook 07, run inside the trainer: each skipped step leaves the weights alone and halves the
    scale; a clean step moves them."""
    trainer = nb10.Trainer(nb10.Recipe(precision="float16", loss_scaling=True, init_scale=2.0**24), 31, seed=0)
    x, y = random_batch(DATA, 4, 16, np.random.default_rng(0))
    history = []
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(10):
            before = [w.data.copy() for w in trainer.workers[0].weights]
            scale = trainer.workers[0].scaler.scale
            trainer.step(x, y)
            moved = any(not np.array_equal(w.data, b) for w, b in zip(trainer.workers[0].weights, before))
            history.append((scale, trainer.log["skipped"][-1], moved))
    skipped = [s for _, s, _ in history]
    assert any(skipped) and not all(skipped)
    for (scale, skip, moved), (next_scale, _, _) in zip(history, history[1:]):
        assert moved != skip
        assert next_scale == (scale / 2 if skip else scale)
    assert trainer.log["scale"][-1] == 2.0**24 / 2 ** sum(skipped)
    for p, w in zip(trainer.model.parameters(), trainer.workers[0].weights):  # the fp16 model is the rounded master
        assert p.data.dtype == np.float16 and np.array_equal(p.data, w.data.astype(np.float16))


def test_micro_batches_beyond_the_windows_are_left_out_and_checkpointing_lowers_the_peak():
    from haaw.tools.memory import track_memory

    x, y = random_batch(DATA, 2, 8, np.random.default_rng(0))
    many = nb10.Trainer(nb10.Recipe(micro_batches=5), 31, seed=0)
    one = nb10.Trainer(nb10.Recipe(), 31, seed=0)
    many.step(x, y)
    one.step(x, y)
    np.testing.assert_allclose(many.last_gradient, one.last_gradient, rtol=1e-10, atol=1e-14)
    peaks = []
    for flag in (False, True):
        model = TinyGPT(31, seed=0)
        model.checkpointing = flag
        with track_memory() as memory:
            F.cross_entropy(model(x).reshape(-1, 31), y.reshape(-1)).backward()
        peaks.append(memory.peak)
    assert peaks[1] < peaks[0]


def test_the_torch_recipe_refuses_float16_and_the_block_mirror_uses_the_tensors_it_is_given():
    torch = pytest.importorskip("torch")
    from haaw.tools.torch_mirror import block_in_torch

    with pytest.raises(ValueError, match="bfloat16"):
        nb10.train_in_torch(nb10.Recipe(precision="float16"), TinyGPT(31, seed=0), [], torch)
    model = TinyGPT(31, seed=0)
    block = model.blocks[0]
    P = {id(p): torch.tensor(p.data, requires_grad=True) for p in block.parameters()}
    out, same = block_in_torch(block, torch.zeros(1, 4, 32, dtype=torch.float64), None, torch, is_causal=True, params=P)
    assert same is P
    out.sum().backward()
    assert all(t.grad is not None for t in P.values())
