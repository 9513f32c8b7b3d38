"""Exercises of notebook 01: the chain rule on one tiny chain."""
import math

import numpy as np

from .code import Case, CodeExercise, LearnerError, Mistake
from .core import NumberExercise, register
from .domain import DRAWN, VALUES, Domain, scalar

register(NumberExercise(
    key="01-dL/dw",
    question="w = 3, x = 2, y = w·x, L = y². Predict dL/dw by hand.",
    answer=24,
    mistakes={
        12: "12 is dL/dy = 2y: you stopped one link early. Multiply by dy/dw too.",
        6: "6 is y, the forward value, not a derivative. (It is also 2w, the derivative of w² alone: in "
           "L = w²x² the factor x² = 4 stays, so dL/dw = 2w·x².)",
        2: "2 is dy/dw = x alone: it still has to be multiplied by dL/dy.",
        36: "36 is L, the loss itself (at these numbers also dL/dx), not dL/dw: how fast does L move when w moves?",
        8: "8 is 2·x², the derivative of L = w²x² with the w dropped: d(w²)/dw = 2w, so dL/dw = 2w·x².",
        18: "18 is 2·w²: that differentiates L = w²x² with respect to x and drops the x. The question asks "
            "about w: dL/dw = 2w·x².",
    },
    hints=("Split the chain: first dL/dy, then dy/dw.",
           "L = y² gives dL/dy = 2y = 12; y = w·x gives dy/dw = x = 2.",
           "The chain rule multiplies the links: dL/dw = dL/dy · dy/dw."),
    solution="y = 6, dL/dy = 2y = 12, dy/dw = x = 2, so dL/dw = 12 · 2 = 24 "
             "(the same from L = w²x² directly: dL/dw = 2w·x² = 24).",
))

register(NumberExercise(
    key="01-step",
    question="Take one gradient-descent step from w = 2 with dL/dw = 36 and η = 0.01. The new w?",
    answer=1.64,
    mistakes={
        2.36: "2.36 moves *with* the gradient, which raises the loss: subtract η·dL/dw instead.",
        0.36: "0.36 is the step η·dL/dw; the new weight is the old one minus that step.",
        -34: "-34 forgot the learning rate: the step is η·dL/dw, not dL/dw.",
        1.88: "1.88 used dL/dy = 12; the update needs dL/dw.",
    },
    hints=("The update rule is w_new = w_old − η · dL/dw.",
           "Here w_old = 2, η = 0.01, and dL/dw = 36, the slope the backward pass above measured: put them into the rule."),
    solution="w_new = 2 − 0.01 · 36 = 2 − 0.36 = 1.64.",
))

register(NumberExercise(
    key="01-chain",
    question="w = 0.5, A = 4w, B = A², C = B + 1, L = 3C. Compute dL/dw with the chain rule.",
    answer=48,
    mistakes={
        12: "12 is dL/dA: one link is missing, dA/dw = 4.",
        3: "3 is dL/dC only: keep multiplying down the chain, to w.",
        16: "16 forgot the last link, dL/dC = 3.",
        24: "24 used dB/dA = A; for B = A² the derivative is 2A = 4.",
        15: "15 is L itself, the forward value.",
    },
    hints=("Forward first: A = 2, B = 4, C = 5, L = 15. Then one local derivative per link.",
           "dL/dC = 3, dC/dB = 1, dB/dA = 2A = 4, dA/dw = 4.",
           "Multiply the four links."),
    solution="dL/dw = dL/dC · dC/dB · dB/dA · dA/dw = 3 · 1 · 4 · 4 = 48.",
))


# --- code exercises: the forward-and-local line of * and ** ------------------------------------------


def mul_local(a, b):
    """a · b, and its local derivatives: d(a·b)/da = b, d(a·b)/db = a."""
    return a * b, (b, a)


def pow_local(a, n):
    """aⁿ for a plain number n, and its local derivative: d(aⁿ)/da = n · aⁿ⁻¹."""
    return a**n, (n * a ** (n - 1),)


def value_and_locals(count):
    """Run a forward-and-local function; return its value and its local derivatives, flat.

    The local derivatives may come in any sequence of the right length (a tuple, a list, a 1-d NumPy array):
    the engine takes them with tuple(...), so each of these works there too."""
    def run(fn, *args):
        result = fn(*args)
        if not (isinstance(result, (tuple, list)) and len(result) == 2 and _a_sequence(result[1])):
            raise LearnerError(f"return two things: the value, then a tuple of {count} local derivative(s), as in "
                               f"`return out, ({', '.join(['d_a', 'd_b'][:count])}{',' if count == 1 else ''})`; "
                               f"got {result!r:.60}")
        out, local = result
        if len(local) != count:
            raise LearnerError(f"the tuple of local derivatives needs {count} entr{'y' if count == 1 else 'ies'}, "
                               f"one per input; yours has {len(local)}")
        return (out, *local)
    return run


def _a_sequence(local) -> bool:
    """A tuple, list or 1-d array (of anything: the checker says afterwards which entry is not a number)."""
    if isinstance(local, np.ndarray):
        return local.ndim == 1
    return isinstance(local, (tuple, list))


# --- a derivative estimated from the function's values, not written as a formula ------------------------------


class _Watched(float):
    """The input a, noting each small step a learner's code takes from it: a + h, a - h, a·(1 + h).

    A finite difference computes the function at a ± h; the formula of the derivative never needs to. Anything
    the step is combined with gives back a plain number, so only steps from a itself are noted."""

    def __new__(cls, value, steps: list):
        self = super().__new__(cls, value)
        self.steps = steps
        return self

    def _note(self, step):
        try:
            sizes = np.abs(np.asarray(step, dtype=np.float64)).ravel()
        except (TypeError, ValueError):
            return
        small = sizes[(sizes > 0) & (sizes <= 1e-2 * max(1.0, abs(float(self))))]
        self.steps.extend(float(s) for s in small[:1])

    def __add__(self, other):
        self._note(other)
        return float(self) + other

    def __sub__(self, other):
        self._note(other)
        return float(self) - other

    def __radd__(self, other):
        self._note(other)
        return other + float(self)

    def __rsub__(self, other):
        self._note(other)
        return other - float(self)

    def __mul__(self, other):
        if isinstance(other, (int, float)) and 0 < abs(other - 1) <= 1e-2:  # a relative step, a·(1 + h)
            self.steps.append(float(self) * (other - 1))
        return float(self) * other

    __rmul__ = __mul__


def numerical_slope(reference, count=1):
    """A diagnosis, for a failed case of a forward-and-local exercise: is the derivative a numerical estimate?

    It is, when the value is right, the derivative is off by what a finite difference is off by, and (the
    evidence, when there is some) the learner's function took a small step from a. The formula is exact to
    rounding, a finite difference is not: the check's tolerance (1e-12) refuses every one of them."""
    run = value_and_locals(count)

    def diagnose(fn, *args):
        expected = run(reference, *args)
        steps = []
        mine = run(fn, _Watched(args[0], steps), *args[1:])
        value, right = float(np.asarray(mine[0])), float(expected[0])
        if not math.isclose(value, right, rel_tol=1e-9, abs_tol=1e-300):
            return ""  # the value is wrong as well: not a question of the slope
        for got, want in zip(mine[1:], expected[1:]):
            got, want = float(np.asarray(got)), float(want)
            if math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15):
                continue
            off = abs(got - want) / abs(want) if want else math.inf
            if steps:
                evidence = f"your function also computes at a {'+' if steps[0] > 0 else '−'} {abs(steps[0]):.3g}"
            elif 0 < off <= 1e-2:
                evidence = (f"yours is off by {off:.1g} of the slope: more than rounding, about what a finite "
                            "difference is off by")
            else:
                break
            return (f"This looks like a numerical estimate of the slope ({evidence}); write the derivative's "
                    "formula. Automatic differentiation is not numerical differentiation: each operation's local "
                    "derivative is exact up to rounding, and the check holds it to that (a relative 1e-12), which "
                    "no finite difference meets.")
        return ""

    return diagnose


def draws_two_numbers(rng, pick):
    """draw(rng, pick) for an operation of two numbers: the pick's kind of value in one of them (which one is
    drawn), a plain number of either sign in the other."""
    first = rng.random() < 0.5
    a, b = scalar(rng, pick.values), scalar(rng, "mixed")
    a, b = (a, b) if first else (b, a)
    return Case(DRAWN, (a, b), detail=f"a = {a!r}, b = {b!r}")


register(CodeExercise(
    key="01-mul-local",
    minutes=4,
    question="Write the scalar engine's multiplication: return a·b and its two local derivatives, "
             "d(a·b)/da and d(a·b)/db.",
    signature="mul_local(a, b) -> (a·b, (d/da, d/db))",
    reference=mul_local,
    cases=lambda: [Case("hand-checkable", (2.0, 3.0), detail="a = 2, b = 3"), Case("a negative factor", (-1.5, 4.0)),
                   Case("a zero", (0.0, 5.0)), Case("fractions", (0.25, -0.5))],
    outputs=("a·b", "d(a·b)/da", "d(a·b)/db"),
    run=value_and_locals(2),
    domain=Domain(draws_two_numbers, values=VALUES, size=6),
    slot="mul",
    mistakes=[
        Mistake("each input's own value as its derivative",
                "d(a·b)/da asks how fast a·b moves when a moves: by b per unit of a. Each input's derivative is "
                "the *other* factor.",
                lambda a, b: (a * b, (a, b))),
        Mistake("the same factor, b, for both derivatives",
                "d_a = b is right, but d_b is the *other* factor too: nudging b by ε moves a·b by a·ε, so "
                "d(a·b)/db = a.",
                lambda a, b: (a * b, (b, b))),
        Mistake("the same factor, a, for both derivatives",
                "d_b = a is right, but d_a is the *other* factor too: nudging a by ε moves a·b by b·ε, so "
                "d(a·b)/da = b.",
                lambda a, b: (a * b, (a, a))),
        Mistake("the derivatives of +",
                "1 and 1 are the local derivatives of a + b. For a product, nudging a by ε moves a·b by b·ε.",
                lambda a, b: (a * b, (1.0, 1.0))),
        Mistake("the product as a derivative",
                "a·b is the forward value; the local derivatives are how much it changes per unit of each input.",
                lambda a, b: (a * b, (a * b, a * b))),
    ],
    hints=("Nudge a by a tiny ε: (a + ε)·b = a·b + ε·b. How much did the output move per unit of ε?",
           "Each input's derivative is the other input (b for a, a for b). Return the product first, then the pair "
           "of derivatives in the order of the inputs."),
))

_POW_MORE = [
    Case("an odd power of a negative base", (-2.0, 3.0), detail="(−2)³ = −8, slope 3·(−2)² = 12",
         note="an odd power keeps the sign of a, and a cube rises everywhere: its slope is positive at a < 0 too"),
    Case("a negative exponent at a negative base", (-2.0, -1.0), detail="1/a at −2: −0.5, slope −1/a² = −0.25"),
    Case("an even power of a negative base", (-0.5, 4.0), detail="(−0.5)⁴ = 0.0625, slope 4·(−0.5)³ = −0.5"),
    Case("a = 0", (0.0, 1.0), detail="a¹ at 0: its slope is 1 everywhere, at 0 as well"),
    Case("a fractional exponent", (8.0, 1 / 3), detail="the cube root of 8: 2, slope (1/3)·8^(−2/3) = 1/12"),
    Case("a fractional exponent", (0.25, -0.5), detail="1/√a at 0.25: 2, slope −0.5·0.25^(−1.5) = −4"),
    Case("a fractional exponent", (2.0, 1.5), detail="2^1.5 = 2.83, slope 1.5·√2"),
    Case("a tiny base", (1e-100, 3.0), detail="a = 1e-100: a³ = 1e-300, slope 3e-200",
         note="the slope 3·a² is 3e-200 here: a formula gets it, to its last digits; a step a ± h with h much "
              "larger than a does not"),
    Case("a huge base", (1e150, 2.0), detail="a = 1e150: a² = 1e300, slope 2e150",
         note="at a = 1e150, a + h is a again for any small h (a float keeps 16 digits): a numerical slope is 0 "
              "here, the formula 2·a is not"),
    Case("a huge negative base", (-1e100, 3.0), detail="a = −1e100: a³ = −1e300, slope 3e200"),
]


def _draw_pow(rng, pick):
    """aⁿ for the pick's exponent, at a base of the pick's kind: of either sign where n is a whole number (odd and
    even powers at negative bases), positive where it is not (a negative base has no real fractional power), never 0
    where n < 1 (0ⁿ⁻¹ is a division by zero there); tiny and huge bases as far from 1 as aⁿ and aⁿ⁻¹ stay finite
    and nonzero. A whole n comes as an int or a float."""
    n = pick.exponent
    whole = float(n).is_integer()
    kind = "mixed" if pick.values == "zero" and n < 1 else pick.values
    a = scalar(rng, kind, 0.2, 5.0)
    if kind in ("tiny", "huge"):  # 10^±k with |n|·k and |n − 1|·k under 250: aⁿ and aⁿ⁻¹ are normal floats
        k = rng.uniform(5, min(100, 250 / max(abs(n), abs(n - 1), 1)))
        a = float(np.copysign(10.0 ** (-k if kind == "tiny" else k), a))
    if not whole:
        a = abs(a)
    n = int(n) if whole and rng.random() < 0.5 else float(n)
    return Case(DRAWN, (a, n), detail=f"a = {a:.6g}, n = {n!r}")


register(CodeExercise(
    key="01-pow-local",
    minutes=6,
    question="Write the scalar engine's power with a plain-number exponent n: return aⁿ and its local "
             "derivative d(aⁿ)/da.",
    signature="pow_local(a, n) -> (aⁿ, (d/da,))",
    reference=pow_local,
    # the cube comes first: at a = 4, n = 3 every mistake below gives its own number (with n = 2, 2·a and
    # n·aⁿ⁻¹ agree, and so do aⁿ⁻¹ and (n − 1)·aⁿ⁻¹; at a = 2, n = 3, 2·a and aⁿ⁻¹ agree)
    cases=lambda: [Case("hand-checkable", (4.0, 3.0), detail="4 cubed"), Case("6 squared", (6.0, 2.0)),
                   Case("a square root", (4.0, 0.5)), Case("a negative exponent", (2.0, -1.0)),
                   Case("a negative base", (-3.0, 2.0)),
                   Case("a = 0", (0.0, 3.0), detail="the slope of a cube there is 0",
                        note="n·aⁿ/a equals n·aⁿ⁻¹ everywhere but at a = 0, where it divides by zero"),
                   *_POW_MORE],
    outputs=("aⁿ", "d(aⁿ)/da"),
    run=value_and_locals(1),
    domain=Domain(_draw_pow, values=VALUES, exponents=(2, 3, 4, 5, 1, -1, -2, -3, 0.5, 1.5, 1 / 3, 2.5), size=12),
    slot="pow",
    # the formula is exact to rounding; a finite difference is not, at any step from 1e-3 to 1e-8 (at 1e150 a step
    # that small does not even change a); atol 0, so that the tiny values are held to their own scale
    rtol=1e-12,
    atol=0.0,
    diagnose=numerical_slope(pow_local),
    mistakes=[
        Mistake("|a| in place of a",
                "(−2)³ is −8, not 8: an odd power keeps the sign of a, and an even power's slope changes sign with a "
                "(the slope of a² at −3 is −6). aⁿ and n·aⁿ⁻¹ already carry the right sign for every a: write them "
                "with a itself, without abs().",
                lambda a, n: (abs(a) ** n, (n * abs(a) ** (n - 1),))),
        Mistake("the slope of |a|ⁿ given the sign of a: n·|a|ⁿ⁻¹·sign(a)",
                "that is right for an even n only. For an odd n, n − 1 is even and the slope n·aⁿ⁻¹ is positive on "
                "both sides of 0 (a cube rises everywhere: its slope at −2 is 12): the sign of a must not be put in. "
                "n * a ** (n - 1) gets the sign right for every n by itself.",
                lambda a, n: (a**n, (n * abs(a) ** (n - 1) * float(np.sign(a)),))),
        Mistake("the exponent kept as it was",
                "the power rule lowers the exponent by one: d(aⁿ)/da = n·aⁿ⁻¹, not n·aⁿ.",
                lambda a, n: (a**n, (n * a**n,))),
        Mistake("the factor n forgotten",
                "the exponent comes down as a factor: d(aⁿ)/da = n·aⁿ⁻¹, not aⁿ⁻¹.",
                lambda a, n: (a**n, (a ** (n - 1),))),
        Mistake("the exponent raised instead of lowered",
                "the power rule gives n·aⁿ⁻¹; n·aⁿ⁺¹ grows the exponent.",
                lambda a, n: (a**n, (n * a ** (n + 1),))),
        Mistake("2·a, the derivative of a² only",
                "2·a is right for n = 2 alone. For any n the exponent comes down as the factor: d(aⁿ)/da = n·aⁿ⁻¹ "
                "(for a cube, 3·a²).",
                lambda a, n: (a**n, (2 * a,))),
        Mistake("the exponent without brackets: n*a**n - 1",
                "** binds tighter than * and -, so n * a**n - 1 is (n·aⁿ) − 1. Put the exponent in brackets: "
                "n * a ** (n - 1).",
                lambda a, n: (a**n, (n * a**n - 1,))),
        Mistake("the lowered exponent as the factor: (n − 1)·aⁿ⁻¹",
                "the factor in front is the old exponent n, the new exponent is n − 1: d(aⁿ)/da = n·aⁿ⁻¹.",
                lambda a, n: (a**n, ((n - 1) * a ** (n - 1),))),
    ],
    hints=("The power rule: the exponent comes down in front, and the new exponent is one less.",
           "d(aⁿ)/da = n · aⁿ⁻¹. In Python, put n − 1 in brackets inside the power, and return the one derivative in a "
           "tuple of one: (d,)."),
))
