"""Exercises of notebook 09: accumulation and many workers."""
from .core import Exercise, register

register(Exercise(
    key="09-accumulation-scale",
    question="A batch is split into 4 microbatches of equal size, each loss a mean over its microbatch. "
             "By what factor must each microbatch loss be multiplied so that the accumulated gradient "
             "equals the big batch's?",
    answer=0.25,
    mistakes={
        4: "Multiplying by 4 makes it 16× too big. Each microbatch mean already has the big-batch scale.",
        1: "Without a factor, the 4 accumulated gradients add up to 4× the big-batch gradient.",
    },
    hints=("The big-batch mean is the average of the 4 microbatch means.", "Average = sum × 1/4."),
    solution="1/4 = 0.25: the mean over the big batch is the average of the 4 equal-sized microbatch means.",
))

register(Exercise(
    key="09-token-weight",
    question="A batch has 100 real tokens in total; one microbatch holds 30 of them. For a per-token loss, "
             "the microbatch's *summed* token loss must be divided by what?",
    answer=100,
    mistakes={
        30: "Dividing by its own 30 tokens gives that microbatch's mean, weighting its tokens differently from "
            "the other microbatches'. Divide by the whole batch's real tokens.",
        1: "A plain sum grows with the batch: divide by the number of real tokens in the whole batch.",
    },
    hints=("The big-batch per-token loss is (sum over all real tokens) / (number of real tokens).",
           "Each microbatch contributes its part of the numerator; the denominator is shared."),
    solution="100, the real tokens of the whole batch: then every token weighs 1/100, whichever microbatch it is in.",
))

register(Exercise(
    key="09-ring-bytes",
    question="4 workers all-reduce a 1 GB gradient with a ring. How many GB does each worker send?",
    answer=1.5,
    mistakes={
        3: "3 GB is sending the whole gradient to each of the 3 others. The ring sends chunks of 1/4.",
        0.75: "0.75 GB is only the reduce-scatter half; the all-gather half sends as much again.",
        1: "Count the steps: 3 reduce-scatter and 3 all-gather steps, each sending a quarter.",
    },
    hints=("The gradient is cut into 4 chunks of 0.25 GB.", "2 × (4 − 1) steps, one chunk each."),
    solution="2·(N−1)/N × 1 GB = 2 × 3/4 = 1.5 GB, and it never exceeds 2 GB however many workers join.",
))
