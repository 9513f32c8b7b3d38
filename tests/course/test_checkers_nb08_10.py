"""The checkers of notebooks 08 to 10 refuse wrong versions that learners write, and accept right answers written
in every reasonable form. Each wrong version is plain code as a learner would type it."""

import numpy as np
import pytest

from haaw import Tensor
from haaw.course.exercises import check
from haaw.course.exercises.core import CORRECT, UNREADABLE, WRONG
from haaw.course.exercises.registry import REGISTRY
from haaw.engine import guard


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
    assert check("08-repair-step", guard.unguarded(REGISTRY["08-repair-step"].reference)).status == CORRECT


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


def test_09_dividing_by_every_position_of_the_microbatch_is_named_as_notebook_08_s_bug():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / mask.size   # the same as (losses * mask).mean(), written out

    assert "This looks like the mean over every position, padding counted" in _refused(
        "09-token-weighted", microbatch_loss)


@pytest.mark.parametrize("loss, named", [
    (lambda L, m, t: (L * m).mean(), "the mean over every position, padding counted"),
    (lambda L, m, t: (L * m).sum() * t, "multiplying by the token count instead of dividing"),
    (lambda L, m, t: (L * m).sum() * float(m.sum()) / t ** 2, None),   # the right total, squared, times its own
    (lambda L, m, t: L.mean(), None),                                  # no mask, and a mean over every position
    (lambda L, m, t: (L * m).mean() / t, None),                        # notebook 08's bug, then ÷ total as well
    (lambda L, m, t: (L * m).sum() * t / 100, None),                   # multiplied, then scaled down
    (lambda L, m, t: (L * m).sum() / (t * float(m.size)), None),       # every position and the total
])
def test_09_a_microbatch_loss_is_named_only_when_it_is_that_mistake(loss, named):
    message = _refused("09-token-weighted", loss)
    if named:
        assert f"This looks like {named}" in message, message
    else:
        assert not _named(message), message


@pytest.mark.parametrize("key, answer, says", [
    ("09-accumulation-scale", 0.5, "1/2 would be the factor for 2 microbatches"),
    ("09-token-weight", 20, "20 is 40/2, the real tokens per microbatch on average"),
    ("09-token-weight", 21, "the first microbatch's own real tokens"),
    ("09-token-weight", 64, "counts every position, padding included"),
    ("09-ring-bytes", 2.0, "2 GB is twice the gradient, the bound"),
    ("09-ring-bytes", 1500, "1500 is the answer in MB"),
    ("09-ring-bytes", 6, "6 is the number of steps"),
])
def test_09_the_common_wrong_numbers_are_named(key, answer, says):
    feedback = check(key, answer)
    assert feedback.status == WRONG and says in feedback.message, feedback.message


@pytest.mark.parametrize("key, answer", [
    ("09-accumulation-scale", 0.4), ("09-accumulation-scale", 0.125), ("09-accumulation-scale", 2),
    ("09-token-weight", 19), ("09-token-weight", 10), ("09-token-weight", 16), ("09-token-weight", 80),
    ("09-ring-bytes", 1.75), ("09-ring-bytes", 1.25), ("09-ring-bytes", 14), ("09-ring-bytes", 150),
    ("09-ring-bytes", 1750), ("09-ring-bytes", 2.5),
])
def test_09_other_wrong_numbers_are_not_named_as_a_mistake(key, answer):
    feedback = check(key, answer)
    assert feedback.status == WRONG and "is not it" in feedback.message, feedback.message


def test_09_the_token_weight_answer_is_worked_out_not_read_off_the_question():
    exercise = REGISTRY["09-token-weight"]
    assert exercise.answer == 12 + 9 + 14 + 5 and "40" not in exercise.question


def test_09_a_microbatch_s_own_mean_halved_is_still_named_on_the_new_batches():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * mask).sum() / float(mask.sum()) / 2

    assert "This looks like each microbatch's own mean, divided by the number of microbatches" in _refused(
        "09-token-weighted", microbatch_loss)


def test_09_right_microbatch_losses_are_accepted():
    def microbatch_loss(losses, mask, total_tokens):
        return (losses * (mask / total_tokens)).sum()

    assert check("09-token-weighted", microbatch_loss).status == CORRECT
    assert check("09-token-weighted", guard.unguarded(REGISTRY["09-token-weighted"].reference)).status == CORRECT


# --- 09-ring-all-reduce ----------------------------------------------------------------------------------------


def ring_all_reduce(buffers, send):  # the notebook's cell, filled in
    n = len(buffers)
    chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
    for step in range(n - 1):
        received = send([chunks[i][(i - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - 1 - step) % n] += received[i]
    for step in range(n - 1):
        received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
        for i in range(n):
            chunks[i][(i - step) % n] = received[i]
    return [np.concatenate(c) for c in chunks]


def test_09_the_ring_as_the_notebook_writes_it_passes_with_2d_buffers_among_the_cases():
    feedback = check("09-ring-all-reduce", ring_all_reduce)
    assert feedback.status == CORRECT and "2-D buffers" in feedback.message, feedback.message


def test_09_a_ring_that_splits_the_flattened_buffer_and_reshapes_it_back_passes():
    def flat_ring(buffers, send):
        shape = buffers[0].shape
        return [r.reshape(shape) for r in ring_all_reduce([b.ravel() for b in buffers], send)]

    assert check("09-ring-all-reduce", flat_ring).status == CORRECT


def test_09_the_ring_shown_as_the_solution_passes():
    namespace = {"np": np}
    exec(REGISTRY["09-ring-all-reduce"].solution, namespace)
    assert check("09-ring-all-reduce", namespace["ring_all_reduce"]).status == CORRECT


def test_09_a_ring_whose_chunks_are_views_into_the_caller_s_buffers_is_refused():
    def ring_in_views(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b, n) for b in buffers]  # views: += writes into the caller's gradients
        for step in range(n - 1):
            received = send([chunks[i][(i - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - 1 - step) % n] += received[i]
        for step in range(n - 1):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] = received[i]
        return [np.concatenate(c) for c in chunks]

    message = _refused("09-ring-all-reduce", ring_in_views)
    assert "it changes the buffers it was given" in message and not _named(message), message


def test_09_an_all_gather_that_copies_from_the_neighbour_s_memory_is_refused():
    def ring_that_peeks(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
        for step in range(n - 1):
            received = send([chunks[i][(i - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - 1 - step) % n] += received[i]
        for step in range(n - 1):
            send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            # every worker takes the finished chunk straight from its left-hand neighbour's list
            chunks = [[chunks[(i - 1) % n][c].copy() if c == (i - step) % n else chunks[i][c] for c in range(n)]
                      for i in range(n)]
        return [np.concatenate(c) for c in chunks]

    message = _refused("09-ring-all-reduce", ring_that_peeks)
    assert "does not depend on what it received through send in the all-gather" in message, message
    assert not _named(message)


def test_09_a_reduce_scatter_that_adds_the_neighbour_s_chunk_from_its_memory_is_refused():
    def ring_that_adds_from_memory(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
        for step in range(n - 1):
            outgoing = [chunks[i][(i - step) % n].copy() for i in range(n)]
            send(outgoing)
            for i in range(n):
                chunks[i][(i - 1 - step) % n] += outgoing[(i - 1) % n]  # what the neighbour sent, not what arrived
        for step in range(n - 1):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] = received[i]
        return [np.concatenate(c) for c in chunks]

    message = _refused("09-ring-all-reduce", ring_that_adds_from_memory)
    assert "does not depend on what it received through send in the reduce-scatter" in message, message


def test_09_a_single_worker_handed_its_own_buffer_back_is_refused():
    def ring_shortcut_for_one(buffers, send):
        if len(buffers) == 1:
            return buffers  # nothing to add: the buffer is already the sum
        return ring_all_reduce(buffers, send)

    message = _refused("09-ring-all-reduce", ring_shortcut_for_one)
    assert "shares its memory with a buffer it was given" in message and "one worker" in message, message


def test_09_a_2d_result_left_flat_is_refused_with_what_to_do():
    def flat_ring(buffers, send):
        return ring_all_reduce([b.ravel() for b in buffers], send)

    message = _refused("09-ring-all-reduce", flat_ring)
    assert "shape (5, 3)" in message and ".reshape" in message, message


def test_09_an_all_gather_that_adds_instead_of_replacing_is_refused():
    def ring_adds_twice(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
        for step in range(n - 1):
            received = send([chunks[i][(i - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - 1 - step) % n] += received[i]
        for step in range(n - 1):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] += received[i]
        return [np.concatenate(c) for c in chunks]

    message = _refused("09-ring-all-reduce", ring_adds_twice)
    assert "wrong values" in message and not _named(message), message


@pytest.mark.parametrize("mistake, named", [
    (dict(gather=False), "no all-gather"), (dict(steps=lambda n: max(n - 2, 0)), "one step short"),
    (dict(average=True), "averaging in the all-reduce")])
def test_09_the_named_ring_mistakes_are_still_named_as_a_learner_writes_them(mistake, named):
    steps = mistake.get("steps", lambda n: n - 1)
    gather, average = mistake.get("gather", True), mistake.get("average", False)

    def ring(buffers, send):
        n = len(buffers)
        chunks = [np.array_split(b.astype(np.float64), n) for b in buffers]
        for step in range(steps(n)):
            received = send([chunks[i][(i - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - 1 - step) % n] += received[i]
        for step in range(n - 1 if gather else 0):
            received = send([chunks[i][(i + 1 - step) % n] for i in range(n)])
            for i in range(n):
                chunks[i][(i - step) % n] = received[i]
        return [np.concatenate(c) / (n if average else 1) for c in chunks]

    assert f"This looks like {named}" in _refused("09-ring-all-reduce", ring)


# --- 10-adam-step ----------------------------------------------------------------------------------------------


def _adam(p, g, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return p - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps), m, v


def test_10_adam_returning_a_list_or_one_stacked_array_is_accepted():
    def adam_list(p, g, m, v, t, lr, beta1, beta2, eps):
        return list(_adam(p, g, m, v, t, lr, beta1, beta2, eps))

    def adam_array(p, g, m, v, t, lr, beta1, beta2, eps):
        return np.array(_adam(p, g, m, v, t, lr, beta1, beta2, eps))

    for fn in (adam_list, adam_array):
        assert check("10-adam-step", fn).status == CORRECT, fn.__name__
    assert check("10-adam-step", guard.unguarded(REGISTRY["10-adam-step"].reference)).status == CORRECT


def test_10_adam_returning_only_the_new_p_is_still_told_to_return_three():
    def adam_p_only(p, g, m, v, t, lr, beta1, beta2, eps):
        return _adam(p, g, m, v, t, lr, beta1, beta2, eps)[0]

    assert "return three arrays: the new p, m and v" in _refused("10-adam-step", adam_p_only)


def test_10_adam_that_updates_its_arrays_in_place_is_refused_as_the_engine_would():
    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
        m *= beta1
        m += (1 - beta1) * g
        v *= beta2
        v += (1 - beta2) * g * g
        p -= lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps)
        return p, m, v

    message = _refused("10-adam-step", adam_step)
    assert "in place, at line" in message and "m *= beta1" in message and not _named(message), message


def test_10_adam_stepping_with_the_uncorrected_mean_is_refused():
    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_hat = v / (1 - beta2**t)
        return p - lr * m / (np.sqrt(v_hat) + eps), m, v  # m, not m_hat

    assert not _named(_refused("10-adam-step", adam_step))


def test_10_adam_that_carries_the_corrected_means_to_the_next_step_is_refused():
    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
        m = (beta1 * m + (1 - beta1) * g) / (1 - beta1**t)
        v = (beta2 * v + (1 - beta2) * g * g) / (1 - beta2**t)
        return p - lr * m / (np.sqrt(v) + eps), m, v

    assert not _named(_refused("10-adam-step", adam_step))


def test_10_adam_with_the_correction_one_step_ahead_is_refused():
    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        return p - lr * (m / (1 - beta1**(t + 1))) / (np.sqrt(v / (1 - beta2**(t + 1))) + eps), m, v

    assert not _named(_refused("10-adam-step", adam_step))


def test_10_adam_without_the_correction_is_named():
    def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        return p - lr * m / (np.sqrt(v) + eps), m, v

    assert "This looks like no bias correction" in _refused("10-adam-step", adam_step)


# --- the outputs of a code exercise ----------------------------------------------------------------------------


def test_outputs_given_as_a_list_or_as_one_stacked_array_are_read_as_the_values_in_order():
    from haaw.course.exercises.code import LearnerError, _as_outputs

    dQ, dK, dV = np.ones((2, 3)), np.zeros((2, 3)), np.full((2, 3), 2.0)
    for given in ((dQ, dK, dV), [dQ, dK, dV], np.array([dQ, dK, dV])):
        outputs = _as_outputs(given, ("dQ", "dK", "dV"), 3)
        assert len(outputs) == 3 and all(np.array_equal(a, b) for a, b in zip(outputs, (dQ, dK, dV)))
    with pytest.raises(LearnerError, match=r"return 3 values, \(dQ, dK, dV\); got one ndarray"):
        _as_outputs(np.ones((2, 3)), ("dQ", "dK", "dV"), 3)  # one array of another length is still one value


def test_a_code_exercise_accepts_its_outputs_in_a_list():
    linear_backward = guard.unguarded(REGISTRY["03-linear-backward"].reference)

    def as_list(X, W, G):
        return list(linear_backward(X, W, G))

    assert check("03-linear-backward", as_list).status == CORRECT


# --- answers typed or computed: units, counted things, functions, words, float32 -----------------------------


@pytest.mark.parametrize("key, answer", [
    ("09-ring-bytes", "1.5 GB"), ("09-ring-bytes", "1.5GB"), ("09-ring-bytes", "1.5 gigabytes"),
    ("09-ring-bytes", "2 * 3/4 GB"), ("03-jacobian-bytes", "275 gigabytes"), ("03-jacobian-bytes", "2^38 bytes"),
    ("03-jacobian-bytes", "256 gibibytes"), ("06-adam-bytes", "16 bytes per parameter"),
    ("02-passes", "9 passes"), ("02-passes", "9 forward-mode passes"), ("06-sqrt", "20 arrays"),
    ("04-clip", "sqrt(169)"), ("04-clip", "√169"), ("04-clip", "np.sqrt(3**2 + 4**2 + 12**2)"),
    ("10-initial-loss", "np.log(31)"), ("10-initial-loss", "ln(31)"),
])
def test_a_right_number_is_accepted_with_its_unit_what_it_counts_or_as_arithmetic(key, answer):
    feedback = check(key, answer)
    assert feedback.status == CORRECT, feedback.message


@pytest.mark.parametrize("answer", ["back-prop", "Back prop", "loss.backward"])
def test_the_right_phase_is_accepted_spaced_hyphenated_or_without_its_brackets(answer):
    feedback = check("10-which-phase", answer)
    assert feedback.status == CORRECT, feedback.message


@pytest.mark.parametrize("key, answer", [
    ("05-softmax-grad", np.float32(-0.15)), ("05-softmax-grad", np.array([-0.15], dtype=np.float32)),
    ("05-softmax-grad", float(np.float32(-0.15))),  # a float32 tensor's .item()
    ("04-product", np.float32(0.9) ** 50),
])
def test_a_right_number_computed_in_float32_is_accepted(key, answer):
    feedback = check(key, answer)
    assert feedback.status == CORRECT, feedback.message


@pytest.mark.parametrize("typed, unit", [("1.5 GiB", "GiB"), ("1500 MB", "MB"), ("1.5e9 bytes", "bytes"),
                                         ("0.75 GiB", "GiB")])
def test_a_unit_other_than_the_one_asked_is_refused_with_the_unit_asked(typed, unit):
    feedback = check("09-ring-bytes", typed)
    assert feedback.status == UNREADABLE, feedback.message
    assert f"the question asks in GB (1 GB = 10⁹ bytes), and {unit} is another unit" in feedback.message
    assert "reduce-scatter half" not in feedback.message  # 0.75 GiB is not the mistake 0.75 GB


def test_the_answer_in_bytes_where_gb_are_asked_is_told_so():
    feedback = check("09-ring-bytes", "1.5e9")
    assert feedback.status == WRONG and "is the answer in bytes, but the question asks in GB" in feedback.message


def test_a_mistake_in_the_unit_asked_is_still_named():
    assert "only the reduce-scatter half" in check("09-ring-bytes", "0.75 GB").message
    assert "log base 2" in check("10-initial-loss", "log2(31)").message


@pytest.mark.parametrize("key, typed, words", [
    ("02-passes", "9 GB", "GB is a unit of memory, but the question asks how many forward-mode passes"),
    ("02-passes", "9 weights", "the question asks how many forward-mode passes; type the number alone"),
    ("03-jacobian-bytes", "68719476736 entries", "the question asks how many bytes"),
    ("07-scale", "64 GB", "the question does not ask for one"),
    ("07-scale", "64 apples", "the unit 'apples' is not one the checker knows"),
])
def test_words_after_a_number_must_be_what_the_question_asks_for(key, typed, words):
    feedback = check(key, typed)
    assert feedback.status == UNREADABLE and words in feedback.message, feedback.message


def test_float32_leniency_names_no_mistake_it_is_not():
    assert "the sign is not" in check("05-softmax-grad", np.float32(0.15)).message
    assert "first logit's gradient" in check("05-softmax-grad", np.float32(0.25)).message
    assert "is not it" in check("05-softmax-grad", np.float32(-0.1501)).message
    assert check("05-softmax-grad", "-0.15000000596").status == WRONG  # typed digits are read as typed


# --- 09-bubble ---------------------------------------------------------------------------------------------------
def test_09_bubbles_written_wrong_in_ways_of_their_own_are_refused_and_not_named():
    wrong = {
        "every stage counted as waiting": lambda stages, micro: stages / (micro + stages - 1),
        "integer division": lambda stages, micro: (stages - 1) // (micro + stages - 1),
        "the busy share's complement, one slot too many": lambda stages, micro: 1 - micro / (micro + stages),
        "idle slots over the stages": lambda stages, micro: (stages - 1) / (stages * micro),
        "right while the stages are few": lambda stages, micro: (stages - 1) / (micro + stages - 1) if stages < 8
        else 0.0,
    }
    for what, fn in wrong.items():
        message = _refused("09-bubble", fn)
        assert not _named(message), (what, message)


def test_09_each_named_bubble_mistake_is_named_when_written_another_way():
    named = {
        "the bubble against the ideal time": lambda stages, micro: (stages - 1.0) / float(micro),
        "the busy share": lambda stages, micro: 1 - (stages - 1) / (micro + stages - 1),
        "one slot too many": lambda stages, micro: 1 - (micro + 1) / (micro + stages),
    }
    for name, fn in named.items():
        assert f"This looks like {name}" in _refused("09-bubble", fn)


def test_09_a_bubble_read_off_the_course_s_simulator_is_refused_a_learner_s_own_count_passes():
    from haaw.course import nb09

    message = _refused("09-bubble", lambda stages, micro: nb09.pipeline_schedule(stages, micro)["bubble"])
    assert "nb09.pipeline_schedule" in message and not _named(message)

    def by_slots(stages, micro):  # a GPipe forward pass slot by slot: which stage works on what, when
        slots = micro + stages - 1
        busy = sum(1 for t in range(slots) for s in range(stages) if 0 <= t - s < micro)
        return 1 - busy / (stages * slots)

    assert check("09-bubble", by_slots).status == CORRECT
    assert check("09-bubble", lambda p, m: 1 - m / (m + p - 1)).status == CORRECT
    assert check("09-bubble", guard.unguarded(REGISTRY["09-bubble"].reference)).status == CORRECT
