"""Exercises of notebook 06: memory, and saving activations or recomputing them."""
from .core import Exercise, register

register(Exercise(
    key="06-adam-bytes",
    question="Training in fp32 with Adam: how many bytes per parameter do the weights, their gradients "
             "and the optimizer state take together?",
    answer=16,
    mistakes={
        4: "4 bytes is the fp32 weight alone. Its gradient and Adam's two moments need room too.",
        8: "8 counts the weight and its gradient. Adam keeps two more fp32 numbers per parameter.",
        12: "12 leaves one of them out: weight 4 + gradient 4 + first moment 4 + second moment 4.",
    },
    hints=("List them: the weight, its gradient, Adam's first moment, Adam's second moment.", "Each is one fp32 number."),
    solution="4 (weight) + 4 (gradient) + 8 (Adam's two moments) = 16 bytes; a 7B model needs 112 GB before any activation.",
))

register(Exercise(
    key="06-overhead",
    question="Backward costs twice the forward. Checkpointing every layer recomputes the whole forward once "
             "during backward. By what fraction does the compute of one training step grow?",
    answer=1 / 3,
    mistakes={
        1: "That compares the recomputation with the forward alone. A step was forward + backward = 3 forwards.",
        0.5: "The step was 1 forward + 2 forwards' worth of backward; one more forward adds 1 to 3.",
        0.25: "Count again: the plain step is 1 + 2 = 3 forwards' worth; checkpointing adds 1.",
    },
    hints=("A plain step costs F + 2F = 3F.", "Checkpointing adds one F."),
    solution="F / (F + 2F) = 1/3 ≈ 0.33: a third more compute, in exchange for keeping only the checkpoints.",
    rtol=1e-2,
))

register(Exercise(
    key="06-sqrt",
    question="A chain of 100 equal layers, checkpointed every 10 layers. At the peak of backward, how many "
             "layers' activations are kept: the checkpoints plus one recomputed segment?",
    answer=20,
    mistakes={
        10: "10 counts only the checkpoints (or only the segment being recomputed): both are alive at once.",
        100: "100 is no checkpointing at all.",
        11: "The segment being recomputed holds its 10 layers' activations, not just one more.",
    },
    hints=("100 / 10 = 10 checkpoints are kept throughout.", "While one segment is recomputed, its 10 layers are alive too."),
    solution="10 checkpoints + 10 layers of the segment being recomputed = 20, against 100: segments of √N minimise it.",
))
