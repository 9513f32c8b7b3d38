"""03-cross-entropy: every correct way of writing it passes; wrong code written the way learners write it, beyond
the checker's named mistakes, is rejected and never misnamed; each named mistake is what its name says."""
import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import guard

KEY = "03-cross-entropy"
# the course\'s reference as a learner would have typed it (unguarded is refused inside check: fetched here)
REFERENCE = guard.unguarded(REGISTRY[KEY].reference)


# --- correct, written in other ways -------------------------------------------------------------------
def with_logaddexp(logits, targets):
    lse = np.logaddexp.reduce(logits, axis=1)            # NumPy's own stable log-sum-exp
    rows = np.arange(len(targets))
    P = np.exp(logits - lse[:, None])
    P[rows, targets] -= 1
    return float(np.mean(lse - logits[rows, targets])), P / len(targets)


def one_row_at_a_time(logits, targets):
    B = len(targets)
    loss, grad = 0.0, np.zeros_like(logits)
    for b in range(B):
        z = logits[b] - max(logits[b])
        s = np.exp(z).sum()
        loss += (np.log(s) - z[targets[b]]) / B
        grad[b] = np.exp(z) / s / B
        grad[b, targets[b]] -= 1 / B
    return loss, grad


def with_torch(logits, targets):
    import torch  # imported by the test first: an import inside the checker's time limit could run out of time

    z = torch.tensor(logits, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(z, torch.tensor(np.array(targets), dtype=torch.long))
    loss.backward()
    return [loss.detach(), z.grad]


@pytest.mark.parametrize("fn", [with_logaddexp, one_row_at_a_time])
def test_every_correct_form_passes(fn):
    feedback = check(KEY, fn)
    assert feedback.status == CORRECT, feedback.message


def test_pytorch_s_autograd_computes_it_but_is_not_writing_it():
    """Letting PyTorch's autograd find the gradient gives the right numbers, and is refused by name."""
    pytest.importorskip("torch")
    feedback = check(KEY, with_torch)
    assert feedback.status == WRONG and "is not its own work" in feedback.message, feedback.message
    assert "PyTorch's autograd" in feedback.message and ".backward(" in feedback.message  # the learner's line


# --- wrong, none of them a named mistake ------------------------------------------------------------
def reference(logits, targets):
    return REFERENCE(logits, targets)


def sign_flipped(logits, targets):
    loss, grad = reference(logits, targets)
    return loss, -grad  # (T − P)/B: the direction that lowers the loss


def mean_over_every_entry(logits, targets):
    loss, grad = reference(logits, targets)
    return loss, grad / logits.shape[1]  # divided by B·C, as if every logit were a sample


def one_max_for_the_whole_batch(logits, targets):
    with np.errstate(all="ignore"):
        shifted = logits - logits.max()  # rows far below the batch's max underflow to 0/0
        P = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        rows = np.arange(len(targets))
        loss = np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[rows, targets])
        P[rows, targets] -= 1
        return loss, P / len(targets)


def loss_per_row_not_the_mean(logits, targets):
    loss, grad = reference(logits, targets)
    rows = np.arange(len(targets))
    shifted = logits - logits.max(axis=1, keepdims=True)
    return np.log(np.exp(shifted).sum(axis=1)) - shifted[rows, targets], grad


def log_base_two(logits, targets):
    loss, grad = reference(logits, targets)
    return loss / np.log(2), grad / np.log(2)


def targets_as_the_class_count(logits, targets):
    loss, grad = reference(logits, targets)
    T = np.zeros_like(grad)
    T[:, targets] = 1 / len(targets)  # a 1 in every row at every target class
    return loss, grad + (np.eye(logits.shape[1])[targets] / len(targets)) - T


def target_logit_not_shifted(logits, targets):  # the max taken off one of the two terms only
    B = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1))
    P = np.exp(shifted - lse[:, None])
    P[np.arange(B), targets] -= 1
    return np.mean(lse - logits[np.arange(B), targets]), P / B


def eye_of_the_batch(logits, targets):  # np.eye(B) where np.eye(C) is meant
    B = len(targets)
    lse = np.logaddexp.reduce(logits, axis=1)
    P = np.exp(logits - lse[:, None])
    return np.mean(lse - logits[np.arange(B), targets]), (P - np.eye(B)[targets]) / B


def changes_logits_in_place(logits, targets):
    logits -= logits.max(axis=1, keepdims=True)
    return reference(logits, targets)


@pytest.mark.parametrize("fn, words", [
    (sign_flipped, "wrong values"),
    (mean_over_every_entry, "wrong values"),
    (one_max_for_the_whole_batch, "±1000"),
    (loss_per_row_not_the_mean, "loss has shape"),
    (log_base_two, "wrong values"),
    (targets_as_the_class_count, "wrong values"),
    (changes_logits_in_place, "changes one of its inputs in place"),
    (target_logit_not_shifted, "loss: wrong values"),
    (eye_of_the_batch, ""),
])
def test_wrong_code_is_rejected_and_not_misnamed(fn, words):
    feedback = check(KEY, fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message


@pytest.mark.parametrize("answer", [None, 3, "P - T", lambda logits: logits, lambda logits, targets: None,
                                    lambda logits, targets: (1.0,), lambda logits, targets: 1 / 0,
                                    lambda z, t: (np.nan, np.full(z.shape, np.nan)), lambda z, t: (1.0, z.tolist()),
                                    lambda z, t: (np.ones(1), z), lambda z, t: (None, None)])
def test_odd_answers_get_a_message_not_an_exception(answer):
    feedback = check(KEY, answer)
    assert feedback.status != CORRECT and feedback.message and "Traceback" not in feedback.message


def test_each_named_mistake_computes_what_its_name_says():
    """Against finite differences of a loss written here: the right gradient, and each mistake's own quantity."""
    rng = np.random.default_rng(0)
    z, t = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])

    def loss(z_):
        return np.mean([np.log(np.sum(np.exp(row))) - row[k] for row, k in zip(z_, t)])

    numeric = np.zeros_like(z)
    for i in np.ndindex(z.shape):
        e = np.zeros_like(z)
        e[i] = 1e-6
        numeric[i] = (loss(z + e) - loss(z - e)) / 2e-6
    mistakes = {m.name: m.code for m in REGISTRY[KEY].mistakes}
    right_loss, right = REFERENCE(z, t)
    assert right_loss == pytest.approx(loss(z), rel=1e-12)
    np.testing.assert_allclose(right, numeric, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mistakes["the gradient without the 1/B"](z, t)[1], 4 * numeric, rtol=1e-6, atol=1e-9)
    summed = mistakes["the sum over the batch, not the mean"](z, t)
    assert summed[0] == pytest.approx(4 * loss(z))
    P = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(mistakes["P without subtracting T"](z, t)[1], P / 4, rtol=1e-12)
    big = np.array([[1000.0, 0.0]])
    assert np.isnan(mistakes["the naive forward, which overflows"](big, np.array([0]))[0])
    assert np.isinf(mistakes["the log of a probability that underflowed"](np.array([[0.0, 800.0]]), np.array([0]))[0])
