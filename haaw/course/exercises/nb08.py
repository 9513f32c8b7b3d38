"""Exercises of notebook 08: diagnose buggy training steps with the audit."""
from .core import Exercise, register

CHECKS = ("gradients zeroed", "mask before the reduction", "independent of padding length", "loss unit",
          "gradient norm", "frozen parameters untouched", "accumulation")
READ = "Run the audit on this step and read the first line marked ✗."


def _others(right: str) -> dict:
    return {c: f"The audit passes '{c}' for this step. {READ}" for c in CHECKS if c != right}


register(Exercise(
    key="08-bug-a",
    question="Step A: which audit check fails first?",
    answer=("loss unit",),
    mistakes=_others("loss unit"),
    hints=("Padding is handled correctly in step A; look at how the rows are combined.",
           "A mean of per-row means gives every sequence the same weight, however many tokens it has."),
    solution="loss unit: step A averages each row, then averages the rows: a per-example mean, where a per-token "
             "mean was intended. Short sequences count as much as long ones.",
    choices=CHECKS,
))

register(Exercise(
    key="08-bug-b",
    question="Step B: which audit check fails first?",
    answer=("accumulation", "accumulation over 2 microbatches"),
    mistakes=_others("accumulation"),
    hints=("Step B is run as two microbatches. Compare their summed gradient with one big batch.",
           "Each microbatch loss is already a full mean; adding two of them doubles the gradient."),
    solution="accumulation: each of the two microbatch losses is a mean, so their gradients add up to twice the "
             "big-batch gradient. Divide each microbatch's loss by the number of microbatches (or by token counts).",
    choices=CHECKS + ("accumulation over 2 microbatches",),
))

register(Exercise(
    key="08-bug-c",
    question="Step C: which audit check fails first?",
    answer=("mask before the reduction",),
    mistakes=_others("mask before the reduction"),
    hints=("Step C does use the mask. But when?", "Look at what happens to a padded position's loss before the mask is applied."),
    solution="mask before the reduction: step C averages over every position, padding included, and only then "
             "multiplies by a mask-derived factor. Whatever sits in the padded positions leaks into the loss.",
    choices=CHECKS,
))
