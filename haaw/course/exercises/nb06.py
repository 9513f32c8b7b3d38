"""Exercises of notebook 06: memory, and saving activations or recomputing them."""
import numpy as np

from ...engine import Function, no_grad, Tensor
from ...engine.graph import context
from ...nn import Linear
from ...tools.memory import saved_arrays, track_memory
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import NumberExercise, register

register(NumberExercise(
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
    solution="4 (weight) + 4 (gradient) + 8 (Adam's two moments) = 16 bytes; the notebook's 7B model (6.7 billion "
             "parameters) needs about 100 GiB for them before any activation.",
))

register(NumberExercise(
    key="06-overhead",
    question="Backward costs twice the forward. Checkpointing every layer recomputes the whole forward once "
             "during backward. By what fraction does the compute of one training step grow?",
    answer=1 / 3,
    forms=(0.33, 0.333),
    mistakes={
        1: "That compares the recomputation with the forward alone. A step was forward + backward = 3 forwards.",
        0.5: "The step was 1 forward + 2 forwards' worth of backward; one more forward adds 1 to 3.",
        0.25: "Count again: the plain step is 1 + 2 = 3 forwards' worth; checkpointing adds 1.",
        100 / 3: "That is the percentage: the question asks for a fraction, 0.33 (or 1/3).",
        4 / 3: "That is the new total, 4 forwards' worth against 3: the question asks how much it grows, "
               "4/3 − 1.",
    },
    hints=("A plain step costs F + 2F = 3F.", "Checkpointing adds one F."),
    solution="F / (F + 2F) = 1/3 ≈ 0.33: a third more compute, in exchange for keeping only the checkpoints.",
    rtol=1e-2,
))

register(NumberExercise(
    key="06-sqrt",
    question="A chain of 100 equal layers, each keeping its output (one array of the same size) for its backward, "
             "is checkpointed in segments of 10 layers. At the peak of backward, how many such arrays are kept: "
             "the checkpoints plus those of the one segment being recomputed?",
    answer=20,
    mistakes={
        10: "10 counts only the checkpoints (or only the segment being recomputed): both are alive at once.",
        100: "100 is no checkpointing at all: every layer's output kept until backward reaches it.",
        11: "The segment being recomputed holds the outputs of all its 10 layers, not just one more array.",
        110: "The checkpoints are the segments' inputs, one per segment: 100 / 10 of them, not 100.",
        19: "19 is what the notebook's tracker measures for this chain: it leaves out the first checkpoint, the "
            "chain's own input, which exists anyway. The question counts every checkpoint, the input included.",
    },
    hints=("100 / 10 = 10 checkpoints are kept throughout.", "While one segment is recomputed, its 10 layers' outputs "
           "are alive too."),
    solution="10 checkpoints + 10 outputs of the segment being recomputed = 20, against 100 without checkpointing. "
             "In general N/k + k, smallest at k = √N.",
))


# --- code exercise: checkpointing through the custom-operation API ------------------------------------


class CheckpointSegment(Function):
    """``CheckpointSegment.apply(fn, x)`` is fn(x), keeping only x; backward runs fn again."""

    always_record = True  # recorded even when x needs no gradient: the parameters inside fn do

    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():                   # nothing recorded, so nothing inside fn is kept
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x             # the input: all that backward will need
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        again = ctx.fn(x)                 # the same forward, this time recorded
        again.backward(g)                 # fills x.grad, and the parameters' .grad inside fn
        return None, x.grad               # one gradient per argument of forward: none for fn


def _segment(width, depth, seed):
    layers = [Linear(width, width, seed=seed + i) for i in range(depth)]

    def fn(h):
        for layer in layers:
            h = layer(h).tanh()
        return h
    return fn, layers


def _copies_of_x(x, out) -> int:
    """Bytes to take off what the memory tracker counted for the operation's ctx. The tracker counts every array
    ctx holds, in a Tensor (ctx.out = out keeps out.data), a list, a dict or an object alike; a copy of the input
    x is x too (ctx.x = x.copy(), or Tensor(x.copy())), so keeping one is allowed."""
    ctx = context(out)
    if ctx is None:
        return 0

    def is_x(a):
        return a.base is x or (a.shape == x.shape and np.array_equal(a, x))

    return sum(a.nbytes for a in saved_arrays(ctx.saved.values(), frozenset({id(x)})) if is_x(a))


def _run_checkpoint(cls, width, depth, batch, seed):
    if not (isinstance(cls, type) and issubclass(cls, Function)):
        raise LearnerError(f"pass your class itself, a subclass of Function; got {type(cls).__name__}")
    fn, layers = _segment(width, depth, seed)
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((batch, width)), requires_grad=True)
    G = rng.standard_normal((batch, width))
    with track_memory() as memory:
        out = cls.apply(fn, x)
        kept = memory.current - _copies_of_x(x.data, out)  # every array on ctx counts, but a copy of x
        if not isinstance(out, Tensor) or not out.requires_grad:
            raise LearnerError("apply(fn, x) must give a Tensor that is part of the graph: does forward return "
                               "out.data, the array?")
        out.backward(G)
    params = [p.grad if p.grad is not None else np.zeros_like(p.data) for layer in layers for p in layer.parameters()]
    dx = x.grad if x.grad is not None else np.zeros_like(x.data)
    return out.data, dx, np.concatenate([p.ravel() for p in params]), np.array(float(kept))


class _KeepsEverything(CheckpointSegment):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.x = Tensor(x, requires_grad=True)
        ctx.out = fn(ctx.x)  # recorded: every activation inside fn stays alive
        return ctx.out.data

    @staticmethod
    def backward(ctx, g):
        ctx.out.backward(g)
        return None, ctx.x.grad


class _RecomputesWithoutRecording(CheckpointSegment):
    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x)  # does not require a gradient: dL/dx never arrives
        again = ctx.fn(x)
        again.backward(g)
        return None, np.zeros_like(ctx.x)


class _KeepsTheOutput(CheckpointSegment):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x, ctx.out = fn, x, out  # the output is kept too, as a Tensor (its .data is an array all the same)
        return out.data


class _KeepsTheOutputArray(CheckpointSegment):  # the same mistake with the bare array: the same outputs, the same name
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x, ctx.out = fn, x, out.data
        return out.data


register(CodeExercise(
    key="06-checkpoint",
    refuses=("function.Checkpoint", "torch.autograd"),  # its backward runs the engine's backward, as PyTorch's does
    question="Write checkpointing as a custom operation: CheckpointSegment.apply(fn, x) returns fn(x), but its forward "
             "runs fn without recording anything and keeps only what backward needs, fn and x (no array but x); its "
             "backward runs fn again on x (this time "
             "recording, with x requiring a gradient), pushes g back through it, and returns one gradient per "
             "argument of forward (None for fn).",
    signature="class CheckpointSegment(Function) with forward(ctx, fn, x) and backward(ctx, g)",
    reference=CheckpointSegment,
    cases=lambda: [Case("two layers", (4, 2, 3, 0), detail="width 4"), Case("three layers", (8, 3, 5, 1), detail="width 8"),
                   Case("six layers", (16, 6, 4, 2), detail="width 16")],
    outputs=("the output", "dL/dx", "the parameters' gradients", "bytes kept by the forward pass, besides x"),
    run=_run_checkpoint,
    mistakes=[
        Mistake("a forward that records",
                "running fn with recording on keeps every activation inside it until backward: exactly what "
                "checkpointing is meant to avoid. Run it under no_grad() and keep only x.",
                _KeepsEverything),
        Mistake("a recomputation whose input needs no gradient",
                "for dL/dx to arrive, the fresh input of the recomputation must be Tensor(x, requires_grad=True).",
                _RecomputesWithoutRecording),
        Mistake("keeping the output as well",
                "backward recomputes the output from x, so keeping it (ctx.out = out, or out.data) is memory spent "
                "for nothing: a Tensor on ctx keeps its array alive. Keep x alone.",
                _KeepsTheOutput),
    ],
    hints=("Forward: run fn on x without recording anything (no_grad), keep on ctx only what backward needs to "
           "run it again, and return the result as a NumPy array (its .data).",
           "Backward: make a fresh Tensor from the saved input, one that requires a gradient; run fn on it again, "
           "recorded this time; send g back through that result; return one gradient per argument of forward "
           "(fn has none)."),
))
