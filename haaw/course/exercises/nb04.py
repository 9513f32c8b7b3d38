"""Exercises of notebook 04: gradient flow through residuals, normalisation and activations."""
import numpy as np

from ...engine import guard
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import NumberExercise, register
from .domain import DRAWN, VALUES, Domain, leading, sample

register(NumberExercise(
    key="04-residual",
    question="y = x + F(x). Backward arrives with dL/dy = 2.0, and F's own derivative is dF/dx = 0.001. dL/dx?",
    answer=2.002,
    mistakes={
        0.002: "0.002 is only the path through F. The skip path x → y passes dL/dy = 2.0 on unchanged: add it.",
        2.0: "2.0 is only the skip path. F's path adds its own, small, contribution 2.0 × 0.001.",
        0.001: "0.001 is F's local derivative alone; multiply by the upstream gradient and add the skip path.",
    },
    hints=("x reaches y along two paths: directly, and through F. Their contributions add.",
           "Direct path: dL/dy × 1. Through F: dL/dy × dF/dx."),
    solution="dL/dx = dL/dy · (1 + dF/dx) = 2.0 × 1.001 = 2.002: the skip path alone delivers 2.0.",
))

register(NumberExercise(
    key="04-product",
    question="A gradient arrives at the top of a stack of 50 layers, and each layer multiplies it by 0.9 as it "
             "passes back through. What fraction of it comes out below the first layer, as the gradient of the "
             "stack's input?",
    answer=0.9**50,
    mistakes={
        45: "45 is 50 × 0.9: per-layer factors multiply, they do not add.",
        0.9: "0.9 is what one layer does. There are 50 of them in a row.",
        0.1**50: "0.1 is what each layer takes away, not what it keeps.",
        0.5: "That is the percentage, rounded (about half a percent survives); as a fraction it is 0.00515.",
        0.9**50 * 100: "That is the percentage; as a fraction it is 0.00515.",
        0.52: "That is the percentage, rounded; as a fraction it is 0.00515.",
        0.005: "That is the right number rounded to 1 significant digit: give at least 3 (or let Python "
               "compute 0.9 ** 50).",
        0.9**49: "That is 49 factors of 0.9, one layer short: on its way from the top to the stack's input the "
                 "gradient passes through all 50 layers, the first one included, and each multiplies in its 0.9.",
        0.9**51: "That is 51 factors of 0.9, one too many: 50 layers multiply in 50 factors.",
        0.0052: "That is the right number rounded to 2 significant digits: give at least 3 (or let Python "
                "compute 0.9 ** 50).",
    },
    hints=("The chain rule multiplies the local factors along the path.", "Fifty links, each multiplying by the same 0.9: a product of equal factors is a power."),
    solution="0.9⁵⁰ = 0.00515377520732012, about 0.00515: about half a percent survives. With 1.1 per layer, 1.1⁵⁰ ≈ 117: it explodes.",
    rtol=1e-3,
    forms=("0.00515", "0.005154", "5.15e-3"),
))

register(NumberExercise(
    key="04-clip",
    question="Two parameter tensors have the gradients [3, 4] and [12]. What is their global gradient norm, "
             "the number clip_grad_norm compares with max_norm?",
    answer=13,
    mistakes={
        19: "19 adds the entries. The norm is the square root of the sum of the squares of all entries.",
        17: "17 adds the two tensors' own norms (5 + 12). Square every entry of both, sum, then take one root.",
        169: "169 is the sum of squares: take its square root.",
    },
    hints=("Treat all gradients as one long vector [3, 4, 12].", "The global norm is the length of that vector: the square root of the sum of its squared entries."),
    solution="√(9 + 16 + 144) = √169 = 13. Clipping to max_norm = 1 would multiply every gradient by 1/13.",
))


# --- code exercises: two activations' backward, and clipping -------------------------------------------


def tanh_backward(y, G):
    """y = tanh(x) from the forward pass, G = dL/dy. Return dL/dx."""
    return G * (1 - y * y)  # tanh'(x) = 1 − tanh(x)², and y already is tanh(x)


def relu_backward(y, G):
    """y = relu(x) from the forward pass, G = dL/dy. Return dL/dx."""
    return G * (y > 0)  # slope 1 where the unit was active, 0 where it was not


def _activation_cases(fn, hand):
    rng = np.random.default_rng(5)
    return [Case("hand-checkable", (fn(np.array(hand)), np.array([1.0, 2.0, -1.0, 0.5]))),
            Case("random", (fn(rng.standard_normal((8, 5)) * 2), rng.standard_normal((8, 5))), detail="(8, 5)"),
            Case("a batch of sequences", (fn(rng.standard_normal((2, 4, 3))), rng.standard_normal((2, 4, 3))), detail="(2, 4, 3)"),
            Case("float32", (fn(rng.standard_normal((4, 6))).astype(np.float32),
                             rng.standard_normal((4, 6)).astype(np.float32))),
            Case("saturated", (fn(np.array([-30.0, 30.0, 0.0])), np.ones(3)), detail="inputs of ±30")]


def _draws_an_activation(fn):
    """draw(rng, pick) for an activation's backward: y = fn(x) of the pick's rank and dtype, the pick's values in x
    (so in y: saturated, dead, tiny but active) or in G."""
    def draw(rng, pick):
        shape = leading(rng, pick.rank, high=5)
        where = "x" if rng.random() < 0.6 else "G"
        x = sample(rng, shape, pick.values if where == "x" else "mixed", pick.dtype)
        G = sample(rng, shape, pick.values if where == "G" else "mixed", pick.dtype)
        return Case(DRAWN, (fn(x).astype(pick.dtype), G), detail=f"{pick.said()} in {where}, shape {shape}")
    return draw


_ACTIVATIONS = dict(ranks=(1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES, keeps_dtype=("dx",), size=8)


register(CodeExercise(
    key="04-tanh-backward",
    minutes=6,
    question="Write tanh's backward: given its output y = tanh(x) (what the forward pass kept) and G = dL/dy, "
             "return dL/dx.",
    signature="tanh_backward(y, G) -> dx",
    reference=tanh_backward,
    cases=lambda: _activation_cases(np.tanh, [0.0, 0.5, -1.0, 2.0]),
    outputs=("dx",),
    domain=Domain(_draws_an_activation(np.tanh), **_ACTIVATIONS),
    slot="tanh",
    mistakes=[
        Mistake("1 − y instead of 1 − y²", "tanh'(x) = 1 − tanh(x)², the square of the output.",
                lambda y, G: G * (1 - y)),
        Mistake("tanh applied twice", "y already is tanh(x): the slope is 1 − y², not 1 − tanh(y)².",
                lambda y, G: G * (1 - np.tanh(y) ** 2)),
        Mistake("the upstream gradient left out",
                "1 − y² is the local derivative; backward multiplies it by G, the gradient arriving from above.",
                lambda y, G: 1 - y * y),
        Mistake("the sigmoid's slope", "y(1 − y) is the sigmoid's derivative; tanh's is 1 − y².",
                lambda y, G: G * y * (1 - y)),
    ],
    hints=("The chain rule: dL/dx = dL/dy · dy/dx, elementwise. What is dy/dx for y = tanh(x), written with y?",
           "tanh'(x) = 1 − tanh(x)², and y already is tanh(x): write the slope with y alone, then multiply it "
           "elementwise by G (into a new array, not into G)."),
))


def _relu_cases():
    cases = _activation_cases(lambda x: np.maximum(x, 0), [-1.0, 0.5, 2.0, 0.0])
    note = ("a unit whose output is 1e-300 was active all the same: its slope is 1, however small the output, and only "
            "an output of exactly 0 is a dead unit. Compare y with 0 itself, not with a small threshold (and not "
            "after a cast to a narrower format, where a tiny output rounds to 0)")
    G = np.array([1.0, -2.0, 3.0, 0.5, -1.5, 2.5, 4.0, -0.5])
    tiny = ((np.float64, [0.0, 1e-300, 0.0, 1e-30, 5e-324, 0.0, 1e-310, 2.0],
             "float64, y = 1e-300, 1e-30, 5e-324 (the smallest float64 above 0) and 1e-310 between exact zeros"),
            (np.float32, [0.0, 1e-30, 0.0, 1e-38, 1e-45, 0.0, 1e-40, 2.0],
             "float32, y = 1e-30, 1e-38, 1e-45 (the smallest float32 above 0) and 1e-40 between exact zeros"))
    for dtype, y, detail in tiny:
        cases.append(Case("tiny positive outputs", (np.array(y, dtype=dtype), G.astype(dtype)), detail=detail,
                          note=note))
    return cases


register(CodeExercise(
    key="04-relu-backward",
    minutes=6,
    question="Write ReLU's backward: given its output y = max(x, 0) and G = dL/dy, return dL/dx.",
    signature="relu_backward(y, G) -> dx",
    reference=relu_backward,
    cases=_relu_cases,
    outputs=("dx",),
    domain=Domain(_draws_an_activation(lambda x: np.maximum(x, 0)), **_ACTIVATIONS),
    slot="relu",
    mistakes=[
        Mistake("y >= 0 as the mask",
                "every output of a ReLU is ≥ 0, so y >= 0 lets the gradient through dead units too. A unit passes "
                "gradient only where it was active, y > 0.",
                lambda y, G: G * (y >= 0)),
        Mistake("ReLU applied to the gradient",
                "the mask comes from the forward pass (where was y positive?), not from the sign of G.",
                lambda y, G: np.maximum(G, 0)),
        Mistake("multiplied by y",
                "the slope of max(x, 0) is 0 or 1, not the output itself.",
                lambda y, G: G * y),
        Mistake("the upstream gradient left out",
                "the 0/1 slope is the local derivative; backward multiplies it by G.",
                lambda y, G: (y > 0).astype(G.dtype)),
    ],
    hints=("Where was the unit active? There the slope is 1 and G passes through; elsewhere it is 0.",
           "A comparison of y with 0 gives a True/False mask of the active units; G times that mask keeps G there "
           "and puts 0 elsewhere."),
))


def init_std(shape, nonlinearity):
    """shape = (fan_in, fan_out), haaw's layout of W; nonlinearity "linear" or "relu". Return the std to draw W from."""
    fan_in = shape[0]  # each output sums over the rows of W: one term per input
    variance = (2.0 if nonlinearity == "relu" else 1.0) / fan_in  # a ReLU halves the mean square: double it back
    return np.sqrt(variance)


def _init_cases():
    return [Case("hand-checkable", ((64, 64), "relu"), detail="shape (64, 64), 'relu'"),
            Case("hand-checkable", ((100, 10), "linear"), detail="shape (100, 10), 'linear'"),
            Case("more inputs than outputs", ((784, 256), "relu"), detail="shape (784, 256), 'relu'"),
            Case("more outputs than inputs", ((3, 500), "relu"), detail="shape (3, 500), 'relu'"),
            Case("more outputs than inputs", ((20, 45), "linear"), detail="shape (20, 45), 'linear'"),
            Case("one input", ((1, 1), "linear"), detail="shape (1, 1), 'linear'"),
            Case("a shape of NumPy integers", ((np.int64(128), np.int64(32)), "relu"),
                 detail="shape (128, 32) as NumPy's integers, 'relu'")]


def _draw_init(rng, pick):
    """fan-in = the pick's count (the variance's denominator), a fan-out that differs from it, either nonlinearity;
    the shape as Python's integers or NumPy's."""
    fan_in = pick.count
    fan_out = int(rng.choice([n for n in (1, 2, 7, 48, 300, 4096) if n != fan_in]))
    shape = (fan_in, fan_out) if rng.random() < 0.5 else (np.int64(fan_in), np.int32(fan_out))
    return Case(DRAWN, (shape, pick.values), detail=f"shape ({fan_in}, {fan_out}), {pick.values!r}")


register(CodeExercise(
    key="04-init-std",
    minutes=10,
    question="Write the standard deviation to draw a layer's weights from so that the layer keeps the mean square "
             "of its input: variance 1/fan-in for a linear layer, 2/fan-in for a layer followed by a ReLU. "
             "W has haaw's layout (fan-in, fan-out).",
    signature="init_std(shape, nonlinearity) -> std",
    reference=init_std,
    cases=_init_cases,
    outputs=("std",),
    domain=Domain(_draw_init, values=("relu", "linear"), counts=(1, 2, 5, 33, 1000, 65536)),
    mistakes=[
        Mistake("1/n instead of 1/√n",
                "the rule fixes the *variance* at 1/fan-in (2/fan-in for ReLU); the standard deviation is its square "
                "root, 1/√fan-in: dividing by fan-in itself makes every layer shrink its signal by √fan-in.",
                lambda shape, nl: (np.sqrt(2.0) if nl == "relu" else 1.0) / shape[0]),
        Mistake("the variance instead of the standard deviation",
                "2/fan-in (or 1/fan-in) is the variance; the function returns the standard deviation, its square root.",
                lambda shape, nl: (2.0 if nl == "relu" else 1.0) / shape[0]),
        Mistake("the 2 for ReLU forgotten",
                "a ReLU sets about half of its inputs to 0, which halves the mean square; the weights' variance is "
                "doubled to make up for it: 2/fan-in after a ReLU, 1/fan-in without one.",
                lambda shape, nl: 1.0 / np.sqrt(shape[0])),
        Mistake("the 2 outside the square root",
                "the variance is 2/fan-in, so the standard deviation is √(2/fan-in) = √2/√fan-in, not 2/√fan-in.",
                lambda shape, nl: (2.0 if nl == "relu" else 1.0) / np.sqrt(shape[0])),
        Mistake("ReLU's variance halved instead of doubled",
                "a ReLU *loses* half the mean square, so the weights must make up for it with twice the variance "
                "(2/fan-in), not half of it.",
                lambda shape, nl: np.sqrt((0.5 if nl == "relu" else 1.0) / shape[0])),
        Mistake("the 2 for every nonlinearity",
                "the 2 makes up for the half a ReLU zeroes; a linear layer zeroes nothing, and keeps 1/fan-in.",
                lambda shape, nl: np.sqrt(2.0 / shape[0])),
        Mistake("fan-out for fan-in",
                "in haaw's layout W is (inputs, outputs): each output sums fan-in = shape[0] terms. shape[1] is the "
                "fan-out (it would be the fan-in in PyTorch's (outputs, inputs) layout).",
                lambda shape, nl: np.sqrt((2.0 if nl == "relu" else 1.0) / shape[1])),
        Mistake("the average of fan-in and fan-out",
                "(fan-in + fan-out)/2 is Glorot and Bengio's compromise between the forward pass (fan-in) and the backward "
                "pass (fan-out), PyTorch's xavier_normal_; to keep the forward signal, as this rule does, divide "
                "by fan-in alone.",
                lambda shape, nl: np.sqrt((2.0 if nl == "relu" else 1.0) * 2 / (shape[0] + shape[1]))),
        Mistake("the uniform distribution's bound",
                "√(6/fan-in) (or √(3/fan-in)) is the bound a of a uniform draw from (−a, a) with that variance, whose "
                "standard deviation is a/√3; the function returns the standard deviation of a normal draw.",
                lambda shape, nl: np.sqrt(3 * (2.0 if nl == "relu" else 1.0) / shape[0])),
    ],
    hints=("Each output of the layer sums fan-in terms, input × weight. Which entry of shape counts the inputs "
           "(haaw's W is (inputs, outputs))?",
           "Variance 1/fan-in for 'linear', 2/fan-in for 'relu'; a standard deviation is the square root of a variance."),
))


def clip_grad_norm(grads, max_norm):
    """Scale all gradients together so that their global norm is at most max_norm.

    Return the clipped gradients (a list, in order) and the norm before clipping."""
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads)))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


def _run_clip(fn, grads, max_norm):
    result = fn([g.copy() for g in grads], max_norm)
    if (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], (list, tuple))
            and np.ndim(result[0]) == 0 and not isinstance(result[0], (list, tuple))):
        raise LearnerError("you returned (norm, clipped gradients): swap them, the list first, then the norm")
    if isinstance(result, tuple) and len(result) == 2 and not isinstance(result[0], (list, tuple)):
        raise LearnerError(f"the first thing returned must be a list of the clipped gradients; got a "
                           f"{type(result[0]).__name__}" + (" (a generator: put the expression in [ ] to make a list)"
                                                           if hasattr(result[0], "__next__") else ""))
    if not (isinstance(result, tuple) and len(result) == 2):
        raise LearnerError(f"return two things: the list of clipped gradients and the norm before clipping; "
                           f"got {type(result).__name__}")
    clipped, norm = result
    if len(clipped) != len(grads):
        raise LearnerError(f"return one clipped gradient per gradient: {len(grads)}, got {len(clipped)}")
    shapes = [np.shape(c) for c in clipped]
    if shapes != [g.shape for g in grads]:
        raise LearnerError(f"each clipped gradient keeps its shape {[g.shape for g in grads]}; got {shapes}")
    norm = np.asarray(norm)
    if norm.dtype.kind == "f":  # the norm is one number: computed in float32 or float64, either is right
        norm = norm.astype(np.float64)
    return np.concatenate([np.ravel(c) for c in clipped]) if grads else np.zeros(0), norm


def _clip_cases():
    rng = np.random.default_rng(6)
    return [Case("hand-checkable", ([np.array([3.0, 1.0]), np.array([4.0])], 1.0), detail="[3, 1] and [4] (norm √26), max_norm 1"),
            Case("already small enough", ([np.array([3.0, 0.0]), np.array([4.0])], 10.0), detail="norm 5, max_norm 10"),
            Case("random", ([rng.standard_normal(s) * 3 for s in ((4, 3), (3,), (3, 2), (2,))], 2.0), detail="four tensors"),
            Case("one tensor", ([rng.standard_normal((5, 5))], 0.5)),
            Case("all zero", ([np.zeros(3), np.zeros((2, 2))], 1.0), note="a zero gradient has norm 0: nothing to "
                 "clip, and no division by zero"),
            Case("float32", ([rng.standard_normal((3, 4)).astype(np.float32) * 5], 1.0))]


def _draw_clip(rng, pick):
    """One to four gradients (the first of the pick's rank, the others of 0 to 3 axes), of the pick's dtype and
    values; max_norm the pick's threshold times their norm, so that every case sits on a known side of it, some
    just above and some just below. (Tiny gradients, whose norm is far below PyTorch's 1e-6, get max_norm 1: the
    norm stays under it, where max_norm / norm and max_norm / (norm + 1e-6) agree.)"""
    shapes = [leading(rng, pick.rank)] + [leading(rng, int(r)) for r in rng.integers(0, 4, int(rng.integers(0, 4)))]
    grads = [sample(rng, shape, pick.values, pick.dtype) for shape in shapes]
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads)))
    max_norm = 1.0 if pick.values == "tiny" or norm == 0 else pick.threshold * norm
    return Case(DRAWN, (grads, max_norm), detail=f"{pick.said()}, {len(grads)} tensors, shapes {shapes}, "
                                                f"norm {norm:.3g}, max_norm {max_norm:.3g}")


register(CodeExercise(
    key="04-clip-grad-norm",
    minutes=10,
    refuses=(*guard.BACKWARD, "nn.clip_grad_norm_", "torch.clip_grad_norm_"),
    question="Clip by global norm: treat all the gradients as one long vector; if its norm is above max_norm, scale "
             "every gradient by the same factor so that the norm becomes max_norm. Return the clipped list and the "
             "norm before clipping.",
    signature="clip_grad_norm(grads, max_norm) -> (clipped grads, norm before)",
    reference=clip_grad_norm,
    cases=_clip_cases,
    outputs=("the clipped gradients", "the norm"),
    run=_run_clip,
    domain=Domain(_draw_clip, ranks=(0, 1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  thresholds=(0.01, 0.5, 0.999, 1.001, 2.0, 100.0), keeps_dtype=("the clipped gradients",), size=8),
    rtol=1e-5,
    mistakes=[
        Mistake("each tensor clipped on its own",
                "clipping by the global norm scales *all* gradients by one factor, which keeps their direction. "
                "Clipping each tensor separately changes the direction of the step.",
                lambda grads, m: ([g * min(1.0, m / (np.linalg.norm(g) + 1e-6)) for g in grads],
                                  float(np.sqrt(sum(np.sum(g**2) for g in grads))))),
        Mistake("clipping by value",
                "np.clip cuts each entry at ±max_norm; clipping by norm scales the whole vector and keeps its "
                "direction.",
                lambda grads, m: ([np.clip(g, -m, m) for g in grads], float(np.sqrt(sum(np.sum(g**2) for g in grads))))),
        Mistake("scaling even when the norm is small enough",
                "clipping only ever shrinks: when the norm is already below max_norm, the gradients stay as they are.",
                lambda grads, m: ([g * m / (np.sqrt(sum(np.sum(h**2) for h in grads)) + 1e-6) for g in grads],
                                  float(np.sqrt(sum(np.sum(g**2) for g in grads))))),
        Mistake("the norm after clipping returned",
                "return the norm *before* clipping: that is the number worth logging, the size of the problem.",
                lambda grads, m: (lambda c: (c[0], min(c[1], m)))(clip_grad_norm(grads, m))),
    ],
    hints=("First the global norm: the square root of the sum of every squared entry of every gradient.",
           "Then one factor for all: scale = min(1, max_norm / norm). Guard against norm = 0 (add 1e-6 to it)."),
))
