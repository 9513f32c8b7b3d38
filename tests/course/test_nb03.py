"""Exercise 03-cross-entropy: every correct way of writing it passes; wrong ones of our own (none of them in the
checker's list of named mistakes) are refused and never misnamed; odd answers get a message, not an exception."""
import numpy as np
import pytest

from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, WRONG

KEY = "03-cross-entropy"


def with_logaddexp(logits, targets):
    lse = np.logaddexp.reduce(logits, axis=1)
    B = len(targets)
    P = np.exp(logits - lse[:, None])
    return float(np.mean(lse - logits[np.arange(B), targets])), (P - np.eye(logits.shape[1])[targets]) / B


def as_a_list_in_float64(logits, targets):
    z = logits.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.sum(np.exp(z - m), axis=1))
    P = np.exp(z - lse[:, None])
    P[np.arange(len(targets)), targets] -= 1
    return [np.mean(lse - z[np.arange(len(targets)), targets]), P / len(targets)]


def with_torch(logits, targets):
    torch = pytest.importorskip("torch")
    z = torch.tensor(logits, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(z, torch.tensor(targets, dtype=torch.long))
    loss.backward()
    return loss.detach(), z.grad


@pytest.mark.parametrize("fn", [with_logaddexp, as_a_list_in_float64, with_torch], ids=lambda f: f.__name__)
def test_every_correct_form_passes(fn):
    feedback = check(KEY, fn)
    assert feedback.status == CORRECT, feedback.message


def global_max(logits, targets):  # one max for the whole batch: a row far below it underflows to 0/0
    B = len(targets)
    shifted = logits - logits.max()
    with np.errstate(all="ignore"):
        P = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        loss = np.mean(np.log(np.exp(shifted).sum(axis=1)) - shifted[np.arange(B), targets])
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return loss, (P - T) / B


def target_logit_not_shifted(logits, targets):  # the max left out of one of the two terms
    B = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1))
    P = np.exp(shifted - lse[:, None])
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return np.mean(lse - logits[np.arange(B), targets]), (P - T) / B


def sign_flipped(logits, targets):
    loss, grad = with_logaddexp(logits, targets)
    return loss, -grad


def divided_by_classes(logits, targets):
    loss, grad = with_logaddexp(logits, targets)
    return loss, grad * len(targets) / logits.shape[1]


def eye_of_the_batch(logits, targets):  # np.eye(B) where np.eye(C) is meant
    B = len(targets)
    lse = np.logaddexp.reduce(logits, axis=1)
    P = np.exp(logits - lse[:, None])
    return np.mean(lse - logits[np.arange(B), targets]), (P - np.eye(B)[targets]) / B


def mean_over_every_entry(logits, targets):  # averages B·C log-probabilities' worth: the loss divided by C too
    loss, grad = with_logaddexp(logits, targets)
    return loss / logits.shape[1], grad


@pytest.mark.parametrize("fn", [global_max, target_logit_not_shifted, sign_flipped, divided_by_classes,
                                eye_of_the_batch, mean_over_every_entry], ids=lambda f: f.__name__)
def test_wrong_code_of_our_own_is_refused_and_not_misnamed(fn):
    feedback = check(KEY, fn)
    assert feedback.status == WRONG, feedback.message
    assert "This looks like" not in feedback.message, feedback.message


@pytest.mark.parametrize("answer", [lambda z, t: (np.nan, np.full(z.shape, np.nan)), lambda z, t: (1.0, z.tolist()),
                                    lambda z, t: (np.ones(1), z), lambda z, t: 3, lambda z, t: (None, None)])
def test_odd_answers_get_a_message(answer):
    feedback = check(KEY, answer)
    assert feedback.status in (WRONG, "unreadable") and "Traceback" not in feedback.message
