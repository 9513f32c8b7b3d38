"""Exercises of notebook 08: diagnose buggy training steps with the audit."""
import numpy as np

from .. import nb08 as props
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import ChoiceExercise, register

CHECKS = ("gradients zeroed", "mask before the reduction", "independent of padding length", "loss unit",
          "gradient norm", "frozen parameters untouched", "gradcheck", "accumulation")
READ = "Run the audits below the three questions and read the first line marked ✗."

# What the audit says about each step of the notebook, check by check ("✓" passes, "✗" fails; a check that is
# missing does not run for that step). tests/claims/test_claims_nb08.py runs the audits and compares.
AUDITED = {
    "a": {"gradients zeroed": "✓", "mask before the reduction": "✓", "independent of padding length": "✓",
          "loss unit": "✗", "gradient norm": "✓"},
    "b": {"gradients zeroed": "✓", "mask before the reduction": "✓", "independent of padding length": "✓",
          "loss unit": "✓", "gradient norm": "✓", "accumulation": "✗"},
    "c": {"gradients zeroed": "✓", "mask before the reduction": "✗", "independent of padding length": "✗",
          "loss unit": "✗", "gradient norm": "✓"},
}
NOT_RUN = {
    "frozen parameters untouched": "it runs only when the model has frozen parameters and the audit is given "
                                   "the optimizer (optimizer=)",
    "gradcheck": "it runs only on custom operations passed with custom_ops=",
    "accumulation": "it runs only when the audit is asked to split the step into microbatches (accumulation=)",
}


SYNONYMS = {  # other ways a learner names a check: accepted where the check is the answer, explained elsewhere
    "gradients zeroed": ("zero grad", "zero_grad", "gradients not zeroed", "stale gradients"),
    "mask before the reduction": ("mask before reducing", "mask before reduction", "mask", "masking"),
    "independent of padding length": ("padding length", "padding"),
    "loss unit": ("unit", "unit of the loss"),
    "gradient norm": ("norm", "grad norm"),
    "frozen parameters untouched": ("frozen parameters", "frozen"),
    "gradcheck": ("gradient check", "gradcheck of a custom operation"),
    "accumulation": ("accumulation over 2 microbatches", "accumulation over two microbatches",
                     "gradient accumulation"),
}


def _answer(check: str) -> tuple:
    return (check,) + SYNONYMS[check]


def _others(step: str) -> dict:
    """For every check but the right one, what the audit really says about it for this step."""
    said = AUDITED[step]
    first = next(c for c in CHECKS if said.get(c) == "✗")
    feedback = {}
    for c in CHECKS:
        if c == first:
            continue
        if c not in said:
            feedback[c] = f"The audit does not run '{c}' for this step: {NOT_RUN[c]}. {READ}"
        elif said[c] == "✓":
            feedback[c] = f"The audit passes '{c}' for this step. {READ}"
        else:
            feedback[c] = (f"The audit does mark '{c}' ✗ for this step, but not first: '{first}' comes earlier in "
                           f"the audit's order and fails already. {READ}")
        for word in SYNONYMS[c]:
            feedback[word] = feedback[c]
    return feedback


register(ChoiceExercise(
    key="08-bug-a",
    question="Step A: which audit check fails first?",
    answer=_answer("loss unit"),
    mistakes=_others("a"),
    hints=("Padding is handled correctly in step A; look at how the rows are combined.",
           "A mean of per-row means gives every sequence the same weight, however many tokens it has."),
    solution="loss unit: step A averages each row, then averages the rows: a per-example mean, where a per-token "
             "mean was intended. Short sequences count as much as long ones.",
    choices=CHECKS,
))

register(ChoiceExercise(
    key="08-bug-b",
    question="Step B: which audit check fails first?",
    answer=_answer("accumulation"),
    mistakes=_others("b"),
    hints=("Step B is run as two microbatches. Compare their summed gradient with one big batch.",
           "Each microbatch loss is already a full mean; adding two of them doubles the gradient."),
    solution="accumulation: each of the two microbatch losses is a mean, so their gradients add up to twice the "
             "big-batch gradient. Divide each microbatch's loss by the number of microbatches (or by token counts).",
    choices=CHECKS,
))

register(ChoiceExercise(
    key="08-bug-c",
    question="Step C: which audit check fails first?",
    answer=_answer("mask before the reduction"),
    mistakes=_others("c"),
    hints=("Step C does use the mask. But when?", "Look at what happens to a padded position's loss before the mask is applied."),
    solution="mask before the reduction: step C averages over every position, padding included, and only then "
             "multiplies by a mask-derived factor. Whatever sits in the padded positions leaks into the loss.",
    choices=CHECKS,
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
    loss = reduce(losses, batch[2])
    if not hasattr(loss, "backward") or getattr(loss, "shape", None) != ():
        raise LearnerError(f"return the loss as a Tensor holding one number (shape ()), so that backward can run; "
                           f"got {loss!r:.50}")
    loss.backward()
    grads = np.concatenate([(p.grad if p.grad is not None else np.zeros_like(p.data)).ravel()
                            for p in model.parameters()])
    return np.asarray(loss.item()), grads


def _audit_says(reduce, lengths, pad_to, seed):
    from ...tools.audit import audit

    report = audit(props.make_model(seed=seed), props.token_losses, reduce,
                   props.padded_batch(lengths=lengths, pad_to=pad_to, seed=seed))
    return "The audit of this step says:\n" + str(report)


register(CodeExercise(
    key="08-repair-step",
    forbidden=(("haaw.course.nb08", "masked_mean"),),
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
