"""The checkers of notebooks 08 to 10 refuse wrong versions that learners write, and accept right answers written
in every reasonable form. Each wrong version is plain code as a learner would type it."""
import inspect

import numpy as np

from haaw import Tensor
from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.course.exercises.registry import REGISTRY


def _refused(key, fn):
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    return feedback.message


def _named(message) -> bool:
    return "This looks like" in message


# --- 08-repair-step ------------------------------------------------------------------------------------------


def test_08_a_reduction_that_normalises_the_mask_in_place_is_refused_and_told_so():
    def fixed_loss(losses, mask):
        mask /= mask.sum()  # the weights of a mean per token, written into the caller's mask
        return (losses * mask).sum()

    def fixed_loss_with_out(losses, mask):
        np.divide(mask, mask.sum(), out=mask)
        return (losses * mask).sum()

    for fn in (fixed_loss, fixed_loss_with_out):
        message = _refused("08-repair-step", fn)
        assert "it changes the mask it was given" in message and not _named(message), message


def test_08_the_same_weights_in_a_new_array_are_right():
    def fixed_loss(losses, mask):
        weights = mask / mask.sum()
        return (losses * weights).sum()

    assert check("08-repair-step", fixed_loss).status == CORRECT
    assert check("08-repair-step", inspect.unwrap(REGISTRY["08-repair-step"].reference)).status == CORRECT


def test_08_dividing_by_the_number_of_sequences_is_refused_without_naming_a_mistake():
    def fixed_loss(losses, mask):
        return (losses * mask).sum() / mask.shape[0]

    message = _refused("08-repair-step", fixed_loss)
    assert "the loss: wrong values" in message and not _named(message), message


def test_08_a_mean_taken_in_numpy_is_refused_because_backward_cannot_reach_the_model():
    def fixed_loss(losses, mask):
        return Tensor(np.sum(losses.data * mask) / np.sum(mask))

    message = _refused("08-repair-step", fixed_loss)
    assert "does not require a gradient" in message and not _named(message), message


def test_08_a_mean_per_sequence_is_named_as_that_mistake():
    def fixed_loss(losses, mask):
        per_sequence = (losses * mask).sum(dim=1) / mask.sum(axis=1)
        return per_sequence.mean()

    message = _refused("08-repair-step", fixed_loss)
    assert "This looks like the mask fixed, but still a mean per sequence" in message, message


# --- 09-token-weighted -----------------------------------------------------------------------------------------


def test_09_a_token_count_typed_in_is_refused_on_a_batch_of_another_size():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / 16  # the notebook's batch holds 16 real tokens

    message = _refused("09-token-weighted", microbatch_loss)
    assert "10 in all" in message and not _named(message), message


def test_09_a_microbatch_loss_that_scales_the_mask_in_place_is_refused_and_told_so():
    def microbatch_loss(losses, mask, total_tokens):
        mask /= total_tokens
        return (losses * mask).sum()

    message = _refused("09-token-weighted", microbatch_loss)
    assert "it changes the mask it was given" in message and not _named(message), message


def test_09_scaling_by_the_tokens_and_again_by_the_microbatches_is_refused():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / total_tokens / 2  # 1/k for accumulation, on top of the token weights

    message = _refused("09-token-weighted", microbatch_loss)
    assert "wrong values" in message and not _named(message), message


def test_09_dividing_by_every_position_of_the_microbatch_is_refused():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / mask.size

    assert not _named(_refused("09-token-weighted", microbatch_loss))


def test_09_a_microbatch_s_own_mean_halved_is_still_named_on_the_new_batches():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / float(mask.sum()) / 2

    assert "This looks like each microbatch's own mean, divided by the number of microbatches" in _refused(
        "09-token-weighted", microbatch_loss)


def test_09_right_microbatch_losses_are_accepted():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * (mask / total_tokens)).sum()

    assert check("09-token-weighted", microbatch_loss).status == CORRECT
    assert check("09-token-weighted", inspect.unwrap(REGISTRY["09-token-weighted"].reference)).status == CORRECT
