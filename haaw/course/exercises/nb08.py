"""Exercises of notebook 08: find the bug in three short pieces of training code, then repair a step."""
import numpy as np

from .. import nb08 as props
from ...engine import guard
from ...engine.plugins import read_only
from .code import Case, CodeExercise, LearnerError, Mistake, learner_line
from .core import BugExercise, register
from .domain import DRAWN, Domain

# What can go wrong in a few lines of training code, as sections 1 to 7 of core 08 teach it: the menu every
# "find the bug" answer picks its explanation from (the key, then other words a learner may use for it).
EXPLANATIONS = {
    "per example": ("per sequence", "mean per example", "loss per example", "mean per sequence", "per sequence mean",
                    "mean of means", "wrong unit"),
    "padding in the sum": ("mask after the reduction", "mask after the sum", "mask after the mean", "mask missing",
                           "padding in the loss"),
    "padding in the count": ("padding in the divisor", "padding in the denominator", "divides by padded size"),
    "unscaled microbatches": ("no 1/k", "missing 1/k", "accumulation without 1/k", "microbatches not scaled"),
    "stale gradients": ("zero_grad missing", "no zero_grad", "zero_grad in wrong place", "gradients not zeroed"),
    "detached": ("leaves the graph", "numpy detour", "detour through numpy", "outside the engine"),
    "in-place edit": ("in place", "inplace", "modified in place", "in-place change"),
}

NO_MICROBATCHES = "there are no microbatches here: one reduction of one batch."
NO_GRAD = "a reduction computes one number from the losses; it never reads or writes .grad."
NO_INPLACE = "every line makes a new tensor; nothing is changed in place."

# The pieces as the notebooks show them, 08-bug-c in core 08 and 08-bug-a and 08-bug-b in its companion
# (tests/claims/test_claims_nb08.py runs the notebooks' own cells and checks that each line number below is the
# line so numbered there, and that each bug has the effect its solution states).
register(BugExercise(
    key="08-bug-a",
    question="loss_a: which line holds the bug, and what does it do?",
    lines=4, line=4, explanation="per example", explanations=EXPLANATIONS,
    line_notes={
        1: "line 1 multiplies every loss by the mask, so each padded position adds 0 to any sum taken later: the "
           "mask comes before the reductions, as it should.",
        2: "line 2 adds up each sequence's masked losses; the padded positions add 0, so each sum holds real tokens "
           "only.",
        3: "line 3 counts each sequence's real tokens (the mask's 1s); no padded position is counted.",
    },
    does="it divides each sequence's summed loss by that sequence's own number of tokens, then averages the four "
         "results. Compare how much one token weighs in a 2-token sequence and in a 6-token one.",
    explanation_notes={
        "padding in the sum": "the sums it divides were masked on line 1, so no padded loss is in them.",
        "padding in the count": "it divides by tokens, the real tokens of each sequence (line 3); no padded position "
                                "is counted.",
        "unscaled microbatches": NO_MICROBATCHES,
        "stale gradients": NO_GRAD,
        "detached": "a division and a mean of Tensors: backward goes through both.",
        "in-place edit": NO_INPLACE,
    },
    hints=("Each line is meant to serve one goal, the mean loss per real token. Check every line against it, the "
           "last one most carefully.",
           "Work out how much one real token weighs in the result, in a 2-token sequence and in a 6-token one "
           "(core 08, section 2)."),
    solution="(4, 'per example'). Line 4 divides each sequence's summed loss by its own length and then averages the "
             "sequences: a mean per example, in which a token of the 2-token sequence weighs three times as much as "
             "one of the 6-token sequence. Lines 1 to 3 are right; the fix is on line 4: "
             "return per_sequence.sum() / tokens.sum().",
))

register(BugExercise(
    key="08-bug-b",
    question="loss_b: which line holds the bug, and what does it do?",
    lines=3, line=1, explanation="padding in the sum", explanations=EXPLANATIONS,
    line_notes={
        2: "line 2 multiplies each sequence's sum by 1 when the sequence has a real token (all four do): it changes "
           "nothing. It uses the mask on whole sequences, after their sums were taken, so it cannot take out a "
           "single padded position.",
        3: "line 3 adds up the sequences and divides by mask.sum(), the real tokens of the whole batch: the right "
           "count for a mean per token.",
    },
    does="it adds up all the positions of each row, whatever the mask says about them.",
    explanation_notes={
        "per example": "no sequence is divided by its own length; line 3 divides the total by the batch's real "
                       "tokens, which is the unit per token.",
        "padding in the count": "line 1 counts nothing; the count is mask.sum() on line 3, and it holds real tokens "
                                "only.",
        "unscaled microbatches": NO_MICROBATCHES,
        "stale gradients": NO_GRAD,
        "detached": "losses.sum(dim=1) is a Tensor operation, and backward goes through it.",
        "in-place edit": NO_INPLACE,
    },
    hints=("Follow the loss of one padded position line by line: where does it go, and is it ever taken out?",
           "Line 2 uses the mask, but on whole sequences, whose sums are already made. Was the mask applied before "
           "those sums were taken?"),
    solution="(1, 'padding in the sum'). Line 1 sums every position of each row, padded ones included; the mask "
             "on line 2 comes after that reduction and only keeps or drops whole sequences, so whatever sits in the "
             "padded positions is in the loss, and padded positions get a gradient. The fix is on line 1: "
             "per_sequence = (losses * mask).sum(dim=1).",
))

register(BugExercise(
    key="08-bug-c",
    question="train_step_c: which line holds the bug, and what does it do?",
    lines=6, line=4, explanation="unscaled microbatches", explanations=EXPLANATIONS,
    line_notes={
        1: "line 1 clears the gradients once per step, before the first microbatch: where accumulation needs it "
           "(inside the loop it would wipe the first microbatch's gradient).",
        2: "line 2 splits the four sequences into two microbatches of two; each sequence is used once.",
        3: "line 3 computes the loss of every position of the microbatch, inside the engine.",
        5: "line 5 adds this microbatch's gradient into .grad, and that adding is what accumulation relies on. "
           "The call is right; ask whether what it differentiates is.",
        6: "line 6 updates the weights once, after both microbatches: right for accumulation.",
    },
    does="it divides the microbatch's masked sum by the microbatch's own real tokens, which makes a complete "
         "per-token mean of those two sequences; line 5 then adds up two such means.",
    explanation_notes={
        "per example": "it divides by all the real tokens of the microbatch, not by each sequence's: within the "
                       "microbatch every token counts once.",
        "padding in the sum": "the losses are multiplied by the mask before the sum.",
        "padding in the count": "mask[rows].sum() counts the mask's 1s, real tokens only.",
        "stale gradients": "line 4 computes a loss and never touches .grad; the gradients are cleared once per step, "
                           "on line 1, as accumulation needs.",
        "detached": "line 4 stays inside the engine: a Tensor times an array, a sum, a division by a number.",
        "in-place edit": "nothing is changed in place on line 4.",
    },
    hints=("The step runs as two microbatches, and its update should equal one step on the whole batch. Compare "
           "what each microbatch adds to .grad with its share of the whole batch's gradient.",
           "Each microbatch's loss on line 4 is a complete per-token mean of its own two sequences. How many such "
           "means does .grad add up?"),
    solution="(4, 'unscaled microbatches'). Line 4 divides each microbatch's masked sum by that microbatch's real "
             "tokens: each loss is a full mean, and backward adds two of them, so the gradient is twice the "
             "whole batch's. The fix is on line 4: divide by float(mask.sum()), the real tokens of the whole batch "
             "(with equal token counts, the same as multiplying each microbatch's mean by 1/2).",
))


# --- code exercise: repair a training step -------------------------------------------------------------


def buggy_loss(losses, mask):
    """The step to repair: the loss of a padded batch, from the loss of every position."""
    # BUG 1: the mean takes in the padded positions; the mask comes after it and only corrects the count
    per_sequence = losses.mean(dim=1) * mask.shape[1] / mask.sum(axis=1)
    # BUG 2: every sequence counts once, however many tokens it has: a loss per example
    return per_sequence.mean()


FIXED_LOSS_SOLUTION = '''\
def fixed_loss(losses, mask):
    """The mean loss per real token: the mask removes the padding *before* the reduction."""
    return (losses * mask).sum() / float(mask.sum())
'''

per_token_loss = props.masked_mean  # the reference: the course's masked mean


def _run_step(reduce, lengths, pad_to, seed):
    batch = props.padded_batch(lengths=lengths, pad_to=pad_to, seed=seed)
    model = props.make_model(seed=seed)
    losses = props.token_losses(model, batch[0], batch[1])
    mask = read_only(batch[2])  # the caller's own mask: the audit and the notebook use it again afterwards
    loss = _reduce_leaving_the_mask(reduce, losses, mask)
    if not hasattr(loss, "backward") or getattr(loss, "shape", None) != ():
        raise LearnerError(f"return the loss as a Tensor holding one number (shape ()), so that backward can run; "
                           f"got {loss!r:.50}")
    loss.backward()
    grads = np.concatenate([(p.grad if p.grad is not None else np.zeros_like(p.data)).ravel()
                            for p in model.parameters()])
    return np.asarray(loss.item()), grads


def _reduce_leaving_the_mask(reduce, losses, mask):
    """``reduce(losses, mask)``; a reduction that changes the mask in place (``mask /= mask.sum()``) is told so at
    its line: the mask is the caller's, and a caller that reduces the same batch again (the audit does) would get
    another loss from it."""
    try:
        return reduce(losses, mask)
    except ValueError as err:
        if "read-only" not in str(err):
            raise
        where = learner_line(err.__traceback__)
        raise LearnerError("it changes the mask it was given" + (f", at {where}" if where else "") + ". The mask "
                           "belongs to the caller, who uses it again: the audit below reduces the same batch a second "
                           "time, and would find another loss. Make a new array instead (weights = mask / "
                           "mask.sum(), not mask /= mask.sum())") from None


def _draw_batch(rng, pick):
    """A batch of the pick's count of sequences, 1 to 9 tokens each, padded to its longest or further, with tokens
    of another seed: the real tokens, the mean's denominator, differ from case to case."""
    lengths = tuple(int(n) for n in rng.integers(1, 10, pick.count))
    pad_to = None if rng.random() < 0.5 else max(lengths) + int(rng.integers(1, 4))
    return Case(DRAWN, (lengths, pad_to, int(rng.integers(3, 100))),
                detail=f"lengths {', '.join(map(str, lengths))} ({sum(lengths)} real tokens)"
                       + (f", padded to {pad_to}" if pad_to else ""))


def _audit_says(reduce, lengths, pad_to, seed):
    from ...tools.audit import audit

    report = audit(props.make_model(seed=seed), props.token_losses, reduce,
                   props.padded_batch(lengths=lengths, pad_to=pad_to, seed=seed))
    return "The audit of this step says:\n" + str(report)


register(CodeExercise(
    key="08-repair-step",
    minutes=15,
    refuses=(*guard.BACKWARD, "course.masked_mean"),
    question="Repair buggy_loss: given the loss of every position (batch × positions, padding included) and the "
             "mask (1 = real token, 0 = padding), return the mean loss per real token. The audit should then pass, "
             "and the gradient equal the reference's.",
    signature="fixed_loss(losses, mask) -> loss (a Tensor holding one number)",
    reference=per_token_loss,
    solution_code=FIXED_LOSS_SOLUTION,
    cases=lambda: [Case("the batch above", ((6, 3, 5, 2), None, 0), detail="lengths 6, 3, 5, 2"),
                   Case("three more padded positions per row", ((6, 3, 5, 2), 9, 0)),
                   Case("another batch", ((1, 7, 4), None, 1), detail="lengths 1, 7, 4"),
                   Case("no padding at all", ((5, 5, 5), None, 2))],
    outputs=("the loss", "the gradients"),
    run=_run_step,
    domain=Domain(_draw_batch, counts=(1, 2, 3, 6)),
    diagnose=_audit_says,
    mistakes=[
        Mistake("the step as given: the mask after the mean, and a mean per sequence",
                "averaging first mixes the padded positions into every sequence's loss; the mask's count applied "
                "afterwards cannot take them out again. And averaging the sequences makes the loss per example. "
                "Mask each position first, then divide the masked sum by the number of real tokens.",
                buggy_loss),
        Mistake("the mask fixed, but still a mean per sequence (the loss in the wrong unit)",
                "averaging each sequence and then the sequences gives a short sequence's tokens more weight than a "
                "long one's. The mean per token divides the masked sum by the number of real tokens.",
                lambda losses, mask: ((losses * mask).sum(dim=1) / mask.sum(axis=1)).mean()),
        Mistake("the unit fixed, but the mask still missing from the sum",
                "dividing by mask.sum() counts only the real tokens, but losses.sum() still adds up the padded "
                "positions' losses. Multiply by the mask before you sum.",
                lambda losses, mask: losses.sum() / float(mask.sum())),
        Mistake("dividing by every position, padding included",
                "(losses · mask).mean() divides by the padded size, so adding padding changes the loss. Divide by "
                "the number of real tokens, mask.sum().",
                lambda losses, mask: (losses * mask).mean()),
        Mistake("a sum without the division",
                "the sum grows with the number of tokens in the batch; divide it by mask.sum() for a mean.",
                lambda losses, mask: (losses * mask).sum()),
    ],
    hints=("Two steps in the right order: zero the padded positions (losses * mask), then reduce.",
           "The reduction is a mean per real token: the masked sum divided by mask.sum()."),
))
