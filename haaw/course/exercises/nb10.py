"""Exercises of notebook 10: one complete learning step."""
import math

from .core import Exercise, register

register(Exercise(
    key="10-initial-loss",
    question="Before training, the model spreads its guess evenly over the 31 characters of the story. "
             "What cross-entropy loss does that give (natural log)?",
    answer=math.log(31),
    mistakes={
        31: "31 is the number of characters. The loss is minus the log of the probability given to the right one.",
        1 / 31: "1/31 is the probability of the right character; the loss is −log of it.",
        math.log2(31): "That is log base 2 (bits). Cross-entropy here uses the natural log.",
    },
    hints=("Every character gets probability 1/31.", "−ln(1/31) = ln 31."),
    solution="−ln(1/31) = ln 31 ≈ 3.43: the loss of knowing nothing. Anything lower has been learned.",
    rtol=1e-3,
))

register(Exercise(
    key="10-which-phase",
    question="In the loop batch → forward → loss → backward → optimizer step, which phase computes the gradients?",
    answer=("backward",),
    mistakes={
        "optimizer step": "The optimizer only uses the gradients: it needs them ready before it runs.",
        "forward": "The forward pass computes values and keeps what backward will need, but no gradient.",
        "loss": "The loss is the single number whose gradients are wanted; it does not compute them.",
        "batch": "Choosing a batch decides which examples the gradient is about; it computes nothing.",
    },
    hints=("Which phase walks the graph in reverse?",),
    solution="backward: the reverse walk through the graph that fills every parameter's .grad.",
    choices=("batch", "forward", "loss", "backward", "optimizer step"),
))
