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
