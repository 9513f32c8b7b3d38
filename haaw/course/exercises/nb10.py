"""Exercises of notebook 10: one complete learning step."""
import math

import numpy as np

from ...engine import guard
from ...engine.plugins import read_only
from .code import Case, CodeExercise, LearnerError, Mistake, learner_line
from .core import ChoiceExercise, NumberExercise, register
from .domain import DRAWN, VALUES, Domain, leading, sample
from .nb07 import torch_reference

register(NumberExercise(
    key="10-initial-loss",
    question="A model that knows nothing spreads its guess evenly over the 31 characters of the story. "
             "What cross-entropy loss does that give (natural log)?",
    answer=math.log(31),
    mistakes={
        31: "31 is the number of characters. The loss is minus the log of the probability given to the right one.",
        1 / 31: "1/31 is the probability of the right character; the loss is −log of it.",
        math.log2(31): "That is log base 2 (bits). Cross-entropy here uses the natural log.",
        3.4: "Close, but give at least three significant digits (or let NumPy compute it: np.log(31)).",
    },
    hints=("Every character gets probability 1/31.", "The loss of one prediction is −ln of the probability given to the right character."),
    solution="−ln(1/31) = ln 31 ≈ 3.43: the loss of an even guess. An untrained model's guess is only roughly "
             "even (its random weights favour some characters a little), so its first losses lie near ln 31, a "
             "little above or below it; a loss that falls well below it and stays there has been learned.",
    rtol=1e-3,
    forms=("3.43", "3.434", "3.4340", 3.43),
))

register(ChoiceExercise(
    key="10-which-phase",
    question="In the loop batch → forward → loss → backward → optimizer step, which phase computes the gradients?",
    answer=("backward", "backward pass", "backpropagation", "backprop", "back propagation", "back-propagation",
            "loss.backward()"),
    mistakes={
        "optimizer step": "The optimizer only uses the gradients: it needs them ready before it runs.",
        "forward": "The forward pass computes values and keeps what backward will need, but no gradient.",
        "loss": "The loss is the single number whose gradients are wanted; it does not compute them.",
        "batch": "Choosing a batch decides which examples the gradient is about; it computes nothing.",
        "forward pass": "The forward pass computes values and keeps what backward will need, but no gradient.",
        "optimizer": "The optimizer only uses the gradients: it needs them ready before it runs.",
        "optimiser step": "The optimizer only uses the gradients: it needs them ready before it runs.",
    },
    hints=("Which phase walks the graph in reverse?",),
    solution="backward: the reverse walk through the graph that fills every parameter's .grad.",
    choices=("batch", "forward", "loss", "backward", "optimizer step", "backward pass", "backpropagation",
             "forward pass", "optimizer", "optimiser step"),
))

register(ChoiceExercise(
    key="10-noisy-adam-step",
    question="A weight's gradient is +1 or −1 at random, with equal chance, at every step of a long run. Adam moves "
             "it by lr · |m̂| / (√v̂ + eps) at each step: about what share of lr is that: \"all of it\", \"half\" or "
             "\"a fifth\"?",
    answer=("a fifth", "fifth", "one fifth", "a fifth of lr", "1/5", "0.2", "about a fifth"),
    mistakes={
        "all of it": "That is the step when the gradients agree. Here every g² is 1, so v̂ = 1 and the step is "
                     "lr · |m̂|; but m̂ is a running mean of random signs, and they mostly cancel.",
        "half": "m̂ averages random signs with most of its weight on about the last 10 steps (beta1 = 0.9): "
                "they cancel more than that. Its spread is √((1 − beta1)/(1 + beta1)) ≈ 0.23.",
        "lr": "That is the step when the gradients agree. Here every g² is 1, so v̂ = 1 and the step is lr · |m̂|; "
              "but m̂ is a running mean of random signs, and they mostly cancel.",
        "0.5": "m̂ averages random signs with most of its weight on about the last 10 steps (beta1 = 0.9): they "
               "cancel more than that. Its spread is √((1 − beta1)/(1 + beta1)) ≈ 0.23.",
    },
    hints=("With every g² equal to 1, what is v̂? Then the step is lr times |m̂|.",
           "m̂ is a mean of random ±1s weighted towards the last 10 or so: its spread is √((1 − beta1)/(1 + beta1)) "
           "≈ 0.23, and its typical size a little less."),
    solution="About a fifth of lr. Every g² is 1, so v̂ = 1 and the step is lr · |m̂|. m̂ is a running mean of random signs, most "
             "of its weight on about the last 10 (beta1 = 0.9), and they mostly cancel: its spread is "
             "√(0.1/1.9) ≈ 0.23 and its typical size about 0.18. Noisy gradients make Adam's steps much smaller "
             "than lr, which is their upper scale.",
    choices=("all of it", "half", "a fifth", "lr", "0.5", "0.2"),
))

# --- code exercise: Adam's step ---------------------------------------------------------------------------


ADAM_SOLUTION = '''\
def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
    """One Adam step for a parameter p with gradient g; m and v are its running means, t counts steps from 1.
    Return the new p, m and v."""
    m = beta1 * m + (1 - beta1) * g          # running mean of the gradient
    v = beta2 * v + (1 - beta2) * g * g      # running mean of its square
    m_hat = m / (1 - beta1**t)               # both started at 0: undo that pull towards 0
    v_hat = v / (1 - beta2**t)
    return p - lr * m_hat / (np.sqrt(v_hat) + eps), m, v
'''


def adam_step(p, g, m, v, t, lr, beta1, beta2, eps, *, correct=True, absolute=False, eps_inside=False, carry=True):
    """The reference Adam step (the learner sees ADAM_SOLUTION). Each keyword, changed from its default, makes one
    mistake of the checker's table."""
    m2 = beta1 * m + (1 - beta1) * g
    v2 = beta2 * v + ((1 - beta2) * np.abs(g) if absolute else (1 - beta2) * g * g)
    m_hat = m2 / (1 - beta1**t) if correct else m2
    v_hat = v2 / (1 - beta2**t) if correct else v2
    denominator = np.sqrt(v_hat + eps) if eps_inside else np.sqrt(v_hat) + eps
    return p - lr * m_hat / denominator, (m2 if carry else m), (v2 if carry else v)


def _adam_variant(**mistake):
    return lambda p, g, m, v, t, lr, beta1, beta2, eps: adam_step(p, g, m, v, t, lr, beta1, beta2, eps, **mistake)


def _three(result, shape) -> tuple | None:
    """(p, m, v) from what an Adam step returned: a tuple or a list of three, or one array stacking the three (as
    np.array([p, m, v]) makes it); None for anything else."""
    if isinstance(result, (tuple, list)) and len(result) == 3:
        return tuple(result)
    if isinstance(result, np.ndarray) and result.shape == (3, *shape):
        return tuple(result)
    return None


def _run_adam(fn, run):
    p = np.array(run["p0"])
    dtype = p.dtype if p.dtype.kind == "f" else np.dtype(np.float64)
    m, v, path = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(run["grads"], start=1):
        # read-only, as the engine hands them over when yours(adam=...) plugs the step in: p -= ... is refused here
        args = [read_only(a, copy=True) for a in (p, np.array(g), m, v)]
        try:
            result = fn(*args, t, run["lr"], run["beta1"], run["beta2"], run["eps"])
        except ValueError as err:
            if "read-only" not in str(err):
                raise
            where = learner_line(err.__traceback__)
            raise LearnerError("it changes p, g, m or v in place" + (f", at {where}" if where else "") + ". The "
                               "engine hands adam_step its own arrays, read-only, and takes the new ones from what it "
                               "returns: make new arrays (m = beta1 * m + ..., p = p - ...), not m *= ... or "
                               "p -= ...") from None
        three = _three(result, p.shape)
        if three is None:
            raise LearnerError("return three arrays: the new p, m and v (m and v are needed at the next step); "
                               f"got {result!r:.50}")
        p, m, v = (np.asarray(r, dtype=dtype) for r in three)  # kept in the parameter's dtype, as the engine does
        path.append(p)
    return np.stack(path)


def _draw_adam(rng, pick):
    """A run of the pick's count of steps on a parameter of the pick's rank and dtype, the gradients of the pick's
    kind (tiny ones, far under eps, with a tiny parameter, so that the steps show against it), with lr, betas and eps
    drawn (beta1 0 included, eps as large as 0.1): the parameters after each step are the reference's."""
    shape = leading(rng, pick.rank, high=4)
    lr = float(rng.choice([1e-3, 0.05, 1.0]))
    beta1, beta2 = ((0.9, 0.999), (0.5, 0.9), (0.0, 0.99), (0.99, 0.9999))[int(rng.integers(4))]
    eps = float(rng.choice([1e-8, 1e-3, 0.1]))
    run = dict(label=f"{pick.said()}, shape {shape}, {pick.count} steps, lr {lr:g}, betas ({beta1:g}, {beta2:g}), "
                     f"eps {eps:g}", lr=lr, beta1=beta1, beta2=beta2, eps=eps,
               p0=sample(rng, shape, "tiny" if pick.values == "tiny" else "mixed", pick.dtype),
               grads=[sample(rng, shape, pick.values, pick.dtype) for _ in range(pick.count)])
    run["params"] = _run_adam(guard.unguarded(adam_step), run)
    return Case(DRAWN, (run,), detail=run["label"])


register(CodeExercise(
    key="10-adam-step",
    minutes=15,
    refuses=(*guard.BACKWARD, "optim.Adam.step", "torch.optim"),
    question="Write one Adam step: update the running means m (of g) and v (of g²) with beta1 and beta2, correct both "
             "for having started at 0 (divide by 1 − betaᵗ), and move p by lr · m̂ / (√v̂ + eps). Return the new "
             "p, m, v.",
    signature="adam_step(p, g, m, v, t, lr, beta1, beta2, eps) -> (p, m, v)",
    reference=adam_step,
    solution_code=ADAM_SOLUTION,
    cases=lambda: [Case("torch.optim.Adam", (run,), detail=f"step by step: {run['label']}") for run in torch_reference()["adam"]],
    expected=lambda case: np.array(case.args[0]["params"]),
    outputs=("the parameters after each step",),
    run=_run_adam,
    domain=Domain(_draw_adam, ranks=(0, 1, 2, 3), dtypes=(np.float64, np.float32), values=VALUES,
                  counts=(1, 3, 12, 40), size=6),
    slot="adam",
    rtol=1e-6,
    mistakes=[
        Mistake("no bias correction",
                "m and v start at 0, so for the first steps they are far too small (m₁ is only 0.1·g). Dividing by "
                "1 − β₁ᵗ and 1 − β₂ᵗ undoes that; without it the first steps have the wrong size.",
                _adam_variant(correct=False)),
        Mistake("|g| instead of g²", "v is the running mean of the *squared* gradient; its square root is then on "
                "the scale of |g|.", _adam_variant(absolute=True)),
        Mistake("eps inside the square root",
                "PyTorch adds eps after the square root: √v̂ + eps. Inside, it changes small steps noticeably.",
                _adam_variant(eps_inside=True)),
        Mistake("m and v not carried to the next step",
                "return the *updated* m and v: the next step's running means start from them.",
                _adam_variant(carry=False)),
    ],
    hints=("Four lines: m, v, the two corrected means, then p. t starts at 1.",
           "Both means started at 0, so divide each by 1 − β to the power t (its own β). The step is lr times the "
           "corrected mean over the square root of the corrected mean square, with eps added after the root."),
))
