"""Exercises of notebook 07: mixed precision."""
import json
from pathlib import Path

import numpy as np

from ...engine import guard
from ...engine.plugins import read_only
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import NumberExercise, register
from .registry import NOT_ATTEMPTED
from .domain import DRAWN, VALUES, Domain, leading, sample

register(NumberExercise(
    key="07-fp16-update",
    question="A weight w = 1.0 is stored in fp16. An update subtracts 0.0001. What does the fp16 weight hold afterwards?",
    answer=1.0,
    mistakes={
        0.9999: "0.9999 is the exact result, but fp16 cannot hold it: just below 1 its numbers are 2⁻¹¹ ≈ 0.00049 "
                "apart, so 0.9999 rounds back to 1.0. The update is lost.",
        # the fp16 number just below 1, exactly or as the hint and the solution round it
        **{below_one: "That is the fp16 number just below 1 (1 − 2⁻¹¹ ≈ 0.99951). But rounding goes to the "
                      "*nearest* fp16 number, and 0.9999 is much closer to 1.0 than to 0.99951."
           for below_one in (1 - 2.0**-11, 0.99951, 0.9995, 0.999512, 0.9995117, 0.99951172)},
        0.999: "0.999 is ten updates' worth below 1. One update gives 0.9999 exactly, and fp16 then rounds that "
               "to its nearest number, 1.0.",
    },
    hints=("fp16 has 10 fraction bits: just below 1 its numbers are 2⁻¹¹ apart.",
           "Round 0.9999 to the nearest multiple of 2⁻¹¹ ≈ 0.000488."),
    solution="1.0: the nearest fp16 numbers are 1.0 and 1 − 2⁻¹¹ ≈ 0.99951; 0.9999 rounds to 1.0. "
             "That is why the update goes to an fp32 master copy.",
))

register(NumberExercise(
    key="07-scale",
    question="A gradient is 2⁻³⁰, and fp16's smallest subnormal is 2⁻²⁴. Which loss scale S brings it exactly up "
             "to 2⁻²⁴?",
    answer=64,
    mistakes={
        6: "6 is the exponent: the scale is 2⁶.",
        4: "In Python `^` is exclusive or, not a power: 2^6 is 4. Write 2**6.",
        2**30: "2³⁰ would bring the gradient to 1: far more than needed, and larger gradients would overflow.",
        2**54: "2⁵⁴ is 2³⁰ × 2²⁴: the scale must *divide out* the gap between the two, 2⁻²⁴ / 2⁻³⁰.",
        1 / 64: "Scaling down makes it smaller still: multiply by 64, don't divide.",
    },
    hints=("2⁻³⁰ × S = 2⁻²⁴.", "Solve for S: divide both sides by 2⁻³⁰. Dividing powers of two subtracts their exponents."),
    solution="S = 2⁶ = 64. Every gradient is multiplied by the same S, so the optimizer divides by 64 afterwards.",
))

register(NumberExercise(
    key="07-dynamic",
    question="A dynamic loss scaler starts at 1024. On an overflow it halves the scale (and that step is skipped); "
             "after 3 clean steps in a row it doubles the scale. The first 2 steps overflow, then 4 clean steps "
             "follow. What is the scale after these 6 steps?",
    answer=512,
    mistakes={
        256: "256 is the scale after the two overflows; the third clean step in a row doubles it.",
        1024: "Each of the two overflows halves the scale (1024 → 512 → 256), and only one doubling follows: "
              "the fourth clean step starts a new count.",
        4096: "The scale doubles once per 3 clean steps in a row, not after every clean step.",
        2048: "An overflow halves the scale; it never doubles it.",
    },
    hints=("Two overflows: two halvings.", "Then count the clean steps: the 3rd in a row doubles the scale and "
           "restarts the count; the 4th is the first of a new count."),
    solution="1024 → 512 → 256 (two overflows, both steps skipped); clean steps 1, 2, 3 → 512 (the count "
             "restarts); clean step 4 → still 512.",
))


# --- code exercises: the dynamic loss scaler, and unscaling before clipping --------------------------------


TORCH_REFERENCE = Path(__file__).resolve().parents[1] / "data" / "torch_reference.json"


def torch_reference() -> dict:
    """Numbers PyTorch computed (scripts/make_reference_data.py), so these checks need no PyTorch."""
    return json.loads(TORCH_REFERENCE.read_text())


def update_scale(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    """One step of a dynamic loss scaler. Return the new scale and the new count of clean steps in a row."""
    if found_inf:                            # an overflow: this step is skipped, and the scale backs off
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:        # a long enough run of clean steps: try a larger scale
        return scale * growth_factor, 0
    return scale, good_steps


def _two_numbers(result) -> list | None:
    """The learner's (scale, count) as a list of two numbers: a tuple, a list, an array of two, any sequence of two
    numbers will do. None if it is not that."""
    if type(result) is tuple and len(result) == 2 and type(result[0]) in (int, float) and type(result[1]) is int:
        return list(result)  # the usual answer, quickly: thousands of steps run per check
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__len__"):
        return None
    try:
        items = list(result)
    except TypeError:  # a 0-d array has a __len__ that raises
        return None
    if len(items) != 2 or not all(np.ndim(i) == 0 and np.asarray(i).dtype.kind in "iuf" for i in items):
        return None
    return items


def _run_scaler(fn, pattern):
    scale, good, scales = pattern["init_scale"], 0, []
    for found_inf in pattern["found_inf"]:
        result = fn(scale, good, found_inf, pattern["growth_factor"], pattern["backoff_factor"], pattern["growth_interval"])
        items = _two_numbers(result)
        if items is None:
            raise LearnerError(f"return two numbers, (new scale, new count of clean steps); got {result!r:.50}")
        scale, good = items
        scales.append(scale)
    return np.array(scales, dtype=np.float64)


def _steps(pattern: str) -> list:
    """"..X." as found_inf for each step: X is a step that overflows."""
    return [step == "X" for step in pattern]


# More patterns, with the scales PyTorch's GradScaler holds after each step (scripts/make_reference_data.py's
# scaler_sequence; tests/course/test_checkers_nb06_07.py runs it again on them when PyTorch is installed). GradScaler
# has no cap: its scale grows past fp16's largest number, 65,504, and past 2^24 alike. And its growth and backoff
# factors need not be inverses of each other, as they are in every pattern above.
BEYOND_THE_FILE = [
    dict(label="no cap: past 65,504 and 65,536", growth_factor=2.0, backoff_factor=0.5, init_scale=16384.0,
         growth_interval=2, found_inf=_steps(".........."),
         scales=[16384.0, 32768.0, 32768.0, 65536.0, 65536.0, 131072.0, 131072.0, 262144.0, 262144.0, 524288.0]),
    dict(label="no cap: past 2^24, and back", growth_factor=2.0, backoff_factor=0.5, init_scale=2.0**22,
         growth_interval=1, found_inf=_steps(".....X.."),
         scales=[2.0**23, 2.0**24, 2.0**25, 2.0**26, 2.0**27, 2.0**26, 2.0**27, 2.0**28]),
    dict(label="×2 up but ×0.25 down", growth_factor=2.0, backoff_factor=0.25, init_scale=1024.0, growth_interval=2,
         found_inf=_steps("..X...XX..."),
         scales=[1024.0, 2048.0, 512.0, 512.0, 1024.0, 1024.0, 256.0, 64.0, 64.0, 128.0, 128.0]),
]


_NOTES = {
    "no cap: past 65,504 and 65,536": "GradScaler puts no cap on the scale: as long as the steps stay clean it keeps "
                                      "growing, past fp16's largest number (65,504) too; only an overflow brings it "
                                      "down.",
    "no cap: past 2^24, and back": "GradScaler puts no cap on the scale, at 2^24 or anywhere: only an overflow brings "
                                   "it down.",
    "×2 up but ×0.25 down": "growth_factor and backoff_factor are two separate settings: here the scale doubles on "
                            "growth but is quartered on an overflow, so neither can be worked out from the other.",
}


def _scaler_cases():
    return [Case("PyTorch's GradScaler", (p,), detail=p["label"], note=_NOTES.get(p["label"], ""))
            for p in torch_reference()["gradscaler"] + BEYOND_THE_FILE]


def _draw_scaler(rng, pick):
    """A pattern of 12 to 40 steps with growth and backoff factors, interval and first scale drawn: it starts a few
    growths short of the pick's threshold (65,536, fp16's limit; 2^24; 1) and runs clean long enough to cross it,
    then overflows at random, some of them in a row. The scales are the reference's, step for step."""
    growth = float(rng.choice([2.0, 1.5, 4.0, 3.0]))
    backoff = float(rng.choice([0.5, 0.25, 0.125, 0.75]))
    interval = int(rng.choice([1, 2, 3, 5]))
    below = int(rng.integers(1, 4))
    if pick.threshold >= 1:
        init = pick.threshold / growth**below * float(rng.choice([1.0, 1.3]))
        found = [False] * ((below + 1) * interval) + list(rng.random(int(rng.integers(6, 20))) < 0.3)
    else:  # down through 1: overflows first
        init = 2.0 ** int(rng.integers(0, 4))
        found = [True] * int(rng.integers(3, 8)) + list(rng.random(int(rng.integers(6, 20))) < 0.3)
    pattern = dict(label=f"growth ×{growth:g}, backoff ×{backoff:g}, interval {interval}, from {init:,.6g}",
                   growth_factor=growth, backoff_factor=backoff, init_scale=init, growth_interval=interval,
                   found_inf=[bool(f) for f in found])
    pattern["scales"] = _run_scaler(guard.unguarded(update_scale), pattern).tolist()
    return Case(DRAWN, (pattern,), detail=f"{pattern['label']}, past {pick.threshold:,.10g}: "
                                          + "".join("X" if f else "." for f in found))


def _capped(pattern, cap: float) -> np.ndarray:
    """The scales of the pattern if the scale could never grow past ``cap``."""
    def update(scale, good, found_inf, growth, backoff, interval):
        scale, good = update_scale(scale, good, found_inf, growth, backoff, interval)
        return min(scale, cap), good
    return _run_scaler(update, pattern)


def _where_the_scale_stops(fn, pattern) -> str:
    """On a failed pattern: if the learner's scales are PyTorch's with a ceiling on the scale, say so."""
    yours, expected = _run_scaler(fn, pattern), np.array(pattern["scales"])
    top = float(yours.max()) if yours.shape == expected.shape else np.inf
    if not (expected.max() > top > pattern["init_scale"] and np.array_equal(yours, _capped(pattern, top))):
        return ""  # nothing to add: the checker adds no line
    return (f"Your scales are GradScaler's with a cap at {top:,.10g}: a min(...) on the scale? Where yours stops, "
            f"PyTorch's goes on growing, to {float(expected.max()):,.10g} here: GradScaler has no cap.")


register(CodeExercise(
    key="07-update-scale",
    minutes=12,
    refuses=(*guard.BACKWARD, "amp.DynamicLossScaler.update", "torch.amp.GradScaler"),
    question="Write a dynamic loss scaler's update, as torch.amp.GradScaler does it: on an overflow (found_inf), "
             "multiply the scale by backoff_factor and restart the count of clean steps; otherwise count one more "
             "clean step, and when the count reaches growth_interval, multiply the scale by growth_factor and "
             "restart the count. Return (new scale, new count).",
    signature="update_scale(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval) "
              "-> (scale, good_steps)",
    reference=update_scale,
    cases=_scaler_cases,
    expected=lambda case: np.array(case.args[0]["scales"]),
    outputs=("the scale after each step",),
    run=_run_scaler,
    domain=Domain(_draw_scaler, thresholds=(65536.0, 2.0**24, 1.0, 0.5), size=5),
    diagnose=_where_the_scale_stops,
    slot="loss_scale",
    mistakes=[
        Mistake("the count kept after an overflow",
                "an overflow ends the run of clean steps: the count starts again from 0, so the scale grows only "
                "after growth_interval clean steps *in a row*.",
                lambda s, n, inf, g, b, k: (s * b, n) if inf else ((s * g, 0) if n + 1 == k else (s, n + 1))),
        Mistake("growing one step late",
                "the scale grows on the step where the count *reaches* growth_interval, not on the one after.",
                lambda s, n, inf, g, b, k: (s * b, 0) if inf else ((s * g, 0) if n == k else (s, n + 1))),
        Mistake("the count not restarted after growing",
                "after a growth the count starts again from 0; otherwise the scale grows again on every clean step "
                "that follows, instead of after another full interval.",
                lambda s, n, inf, g, b, k: (s * b, 0) if inf else ((s * g, n + 1) if n + 1 >= k else (s, n + 1))),
        Mistake("backing off by dividing by the factor",
                "backoff_factor is a multiplier (0.5 halves the scale); dividing by it doubles the scale instead.",
                lambda s, n, inf, g, b, k: (s / b, 0) if inf else ((s * g, 0) if n + 1 == k else (s, n + 1))),
    ],
    hints=("Two branches: found_inf, or a clean step.", "On a clean step, add 1 to the count and compare it with "
           "growth_interval; when equal, grow the scale and set the count to 0."),
))


def unscale_and_clip(grads, scale, max_norm):
    """grads were computed from loss · scale. Return (the true gradients clipped to max_norm, their norm before
    clipping, whether any entry is inf or nan). If one is, return the unscaled gradients as they are: the
    step will be skipped."""
    grads = [g / scale for g in grads]       # unscale first: clipping must see the true gradients
    if not all(np.all(np.isfinite(g)) for g in grads):
        return grads, float("inf"), True
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads)))
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def _clip_always(grads, scale, max_norm):
    """The mistake: multiplying by max_norm / norm on every step, also when the norm is under max_norm."""
    grads = [g / scale for g in grads]
    if not all(np.all(np.isfinite(g)) for g in grads):
        return grads, float("inf"), True
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads)))
    return [g * (max_norm / (norm + 1e-6)) for g in grads], norm, False


def _run_unscale(fn, grads, scale, max_norm):
    result = fn([g.copy() for g in grads], scale, max_norm)
    if not (isinstance(result, tuple) and len(result) == 3 and isinstance(result[0], (list, tuple))):
        raise LearnerError("return three things: the list of gradients, the norm before clipping, and found_inf; "
                           f"got {result!r:.50}")
    out, norm, found = result
    if len(out) != len(grads) or [np.shape(o) for o in out] != [g.shape for g in grads]:
        raise LearnerError("return one gradient per gradient, each with its shape")
    return np.concatenate([np.ravel(o) for o in out]), np.asarray(norm, dtype=np.float64), np.asarray(float(bool(found)))


def _unscale_cases():
    rng = np.random.default_rng(9)
    true = [rng.standard_normal((4, 3)), rng.standard_normal(3)]
    overflow = [np.array([1.0, np.inf]), np.array([2.0])]
    finite = [rng.standard_normal((2, 3)) * 512, rng.standard_normal(4) * 512]

    def last_holds(bad):  # three gradients, the first two finite: only a look at every one finds it
        return [*finite, np.array([0.5, bad, -2.0]) * 512]
    return [Case("hand-checkable", ([np.array([3.0, 4.0]) * 1024], 1024.0, 1.0), detail="[3, 4] · 1024, max_norm 1"),
            Case("a norm under max_norm", ([g * 256 for g in true], 256.0, 100.0)),
            Case("a norm over max_norm", ([g * 65536 for g in true], 65536.0, 0.5)),
            Case("an overflow", (overflow, 1024.0, 1.0), detail="one entry is inf"),
            Case("a nan", ([np.array([np.nan, 1.0])], 8.0, 1.0)),
            Case("an overflow", (last_holds(np.inf), 512.0, 1.0), detail="only the last of three gradients holds inf"),
            Case("a nan", (last_holds(np.nan), 512.0, 1.0), detail="only the last of three gradients holds nan"),
            Case("float32", ([g.astype(np.float32) * 4096 for g in true], 4096.0, 1.0)),
            Case("all zero", ([np.zeros(3), np.zeros((2, 2))], 1024.0, 1.0), note="a zero gradient has norm 0: nothing "
                 "to clip, and no division by zero")]


def _draw_unscale(rng, pick):
    """One to five gradients (the first of the pick's rank), of the pick's dtype, scaled by 2^0 to 2^24 or by a
    scale that is no power of 2; the pick's values: one of VALUES, or an inf, a -inf or a nan in any one of the
    tensors, at any place. max_norm sits on either side of the true norm (1 for tiny gradients, see _draw_clip)."""
    shapes = [leading(rng, pick.rank)] + [leading(rng, int(r)) for r in rng.integers(0, 4, int(rng.integers(0, 5)))]
    kind = pick.values if pick.values in VALUES else "mixed"
    true = [sample(rng, shape, kind, pick.dtype) for shape in shapes]
    scale = float(2.0 ** int(rng.integers(0, 25)) if rng.random() < 0.7 else rng.choice([1000.0, 3.0, 0.5]))
    grads = [(g * g.dtype.type(scale)).astype(pick.dtype) for g in true]
    said = pick.said()
    if pick.values not in VALUES:  # an overflow, in any tensor
        which = int(rng.integers(len(grads)))
        bad = grads[which].copy().reshape(-1) if grads[which].ndim else grads[which].copy().reshape(1)
        bad[int(rng.integers(bad.size))] = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}[pick.values]
        grads[which] = bad.reshape(grads[which].shape)
        said += f" in gradient {which + 1} of {len(grads)}"
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in true)))
    max_norm = 1.0 if kind == "tiny" or norm == 0 else norm * float(rng.choice([0.5, 2.0]))
    return Case(DRAWN, (grads, scale, max_norm),
                detail=f"{said}, shapes {shapes}, scale {scale:g}, max_norm {max_norm:.3g}")


def _clip_then_unscale(grads, scale, max_norm):
    """The mistake: clipping the scaled gradients, then unscaling. Returns the true norm, as the reference does."""
    # unscaling g · scale gives g back: the reference then clips the scaled gradients as they were given
    clipped, norm, found = unscale_and_clip([g * scale for g in grads], scale, max_norm)
    return [g / scale for g in clipped], norm / scale if np.isfinite(norm) else norm, found


def _same_gradients(a, b, low: bool) -> bool:
    rtol, atol = (1e-4, 1e-5) if low else (1e-5, 1e-9)
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))


def _what_went_wrong(fn, grads, scale, max_norm) -> str:
    """On a failed case: an overflow that was not caught (where it was, and whether it was a nan), an overflow caught
    with a norm other than inf, or gradients that are those of clipping before unscaling whatever the norm returned
    (the named mistake needs its norm as well)."""
    _, norm, found = _run_unscale(fn, grads, scale, max_norm)
    bad = [i for i, g in enumerate(grads) if not np.all(np.isfinite(g))]
    if bad and not found:
        i = bad[0]
        nan = bool(np.isnan(grads[i]).any() and not np.isinf(grads[i]).any())
        said = f"found_inf is False, but gradient {i + 1} of {len(grads)} holds {'nan' if nan else 'inf'}"
        if i > 0:
            said += " (the ones before it are finite): every gradient has to be looked at, not only the first"
        if nan:
            said += (". The nan was not caught: np.isinf(nan) is False and nan == inf is False, while "
                     "~np.isfinite(g) catches inf and nan alike")
        return said + "."
    if bad and found and not np.isposinf(norm):
        return f"found_inf is right, but on an overflow the norm to return is inf (float('inf')), not {norm}."
    if bad:
        return ""  # nothing to add: the checker adds no line
    same_norms = True
    for case in _unscale_cases():
        yours, theirs = _run_unscale(fn, *case.args), _run_unscale(_clip_then_unscale, *case.args)
        low = any(np.asarray(g).dtype == np.float32 for g in case.args[0])
        if not _same_gradients(yours[0], theirs[0], low):
            return ""  # nothing to add: the checker adds no line
        same_norms &= _same_gradients(yours[1], theirs[1], low)
    if same_norms:  # the named mistake, already named
        return ""  # nothing to add: the checker adds no line
    return ("Your gradients are what clipping before unscaling gives, on every case: the scaled gradients' norm is "
            "`scale` times too big, so the clip squashes them, and dividing by the scale afterwards leaves them far "
            "too small. Unscale first, then clip (and return the norm of the unscaled gradients, before clipping).")


register(CodeExercise(
    key="07-unscale-then-clip",
    minutes=15,
    refuses=(*guard.BACKWARD, "amp.unscale", "nn.clip_grad_norm_", "torch.clip_grad_norm_",
             "torch.amp.GradScaler"),
    question="The gradients were computed from the loss times `scale`. Divide them by the scale first, then clip "
             "them by global norm to max_norm. Return (the gradients, their norm before clipping, found_inf); if "
             "any entry is inf or nan, return the unscaled gradients unclipped, the norm inf, and True.",
    signature="unscale_and_clip(grads, scale, max_norm) -> (grads, norm, found_inf)",
    reference=unscale_and_clip,
    cases=_unscale_cases,
    outputs=("the gradients", "the norm", "found_inf"),
    run=_run_unscale,
    domain=Domain(_draw_unscale, ranks=(0, 1, 2, 3, 4), dtypes=(np.float64, np.float32),
                  values=(*VALUES, "inf", "-inf", "nan"), keeps_dtype=("the gradients",), size=9),
    diagnose=_what_went_wrong,
    rtol=1e-5,
    mistakes=[
        Mistake("clipping before unscaling",
                "the scaled gradients' norm is `scale` times too big, so the clip squashes them, and dividing by the "
                "scale afterwards leaves them far too small. Unscale first, then clip.",
                _clip_then_unscale),
        Mistake("rescaling when the norm is already under max_norm",
                "clipping only ever shrinks: gradients whose norm is under max_norm pass unchanged (factor 1), and "
                "only a larger norm is scaled down to max_norm. Multiplying by max_norm / norm on every step "
                "stretches small gradients up to max_norm instead.",
                _clip_always),
        Mistake("no unscaling", "the optimizer must see the true gradients: divide every gradient by the scale.",
                lambda grads, s, m: unscale_and_clip(grads, 1.0, m)),
        Mistake("overflows not noticed",
                "an inf or nan anywhere means the scaled loss overflowed: say found_inf = True so the step is skipped.",
                lambda grads, s, m: (lambda r: (r[0], r[1], False))(unscale_and_clip(grads, s, m))),
    ],
    hints=("Three steps, in this order: divide by the scale; look for inf or nan (np.isfinite); clip by the global "
           "norm of what is left.",),
))


# --- code exercise: stochastic rounding to bf16 (the companion's "bf16 without master weights") -------------


from ..nb07 import round_stochastic  # noqa: E402  (the reference lives beside the loop that uses it)



def _bf16():
    from ...amp import dtype
    return dtype("bfloat16")


# 64 draws of u, symmetric about 1/2 (u and 1 − u both drawn) and never on a simple fraction: whichever neighbour
# a learner's code calls "the one above" for a negative x, the share of draws that land above x is the same
_DRAWS = np.sort(np.concatenate([(np.arange(32) + 0.3183098861837907) / 64, 1 - (np.arange(32) + 0.3183098861837907) / 64]))


def _neighbours(x):
    """x's bf16 neighbours below and above, as float64 (equal when x is a bf16 number)."""
    bf16 = _bf16()
    nearest = x.astype(bf16)
    below = np.where(nearest.astype(np.float32) <= x, nearest, np.nextafter(nearest, bf16.type(-np.inf)))
    above = np.where(nearest.astype(np.float32) >= x, nearest, np.nextafter(nearest, bf16.type(np.inf)))
    return below.astype(np.float64), above.astype(np.float64)


def _rounded(out, x):
    """What a learner's round_stochastic returned, as an array of x's shape in bf16, or a LearnerError that names
    what it returned instead."""
    if out is None:
        raise LearnerError("your function returned None: did it forget to `return` the rounded array?")
    if out is Ellipsis:
        raise LearnerError("your function returned `...`: replace it with your code", NOT_ATTEMPTED)
    if type(out).__module__.startswith("torch") and hasattr(out, "detach"):  # a torch tensor: bf16 as well
        bf16_tensor = str(out.dtype) == "torch.bfloat16"
        out = out.detach().cpu()
        out = out.float().numpy().astype(_bf16()) if bf16_tensor else out.numpy()  # bf16 in float32 is exact
    if not isinstance(out, (np.ndarray, np.generic, list, tuple, float, int)) and not hasattr(out, "__array__"):
        raise LearnerError(f"your function returned a {type(out).__name__} ({out!r:.40}), not an array: return the "
                           "rounded x, a bf16 array of x's shape")
    try:
        out = np.asarray(out)
    except Exception:  # noqa: BLE001  (a ragged list, say)
        raise LearnerError(f"your function returned a {type(out).__name__} that is not an array of numbers: return "
                           "the rounded x, a bf16 array of x's shape") from None
    if out.dtype != _bf16() and out.dtype.kind not in "biuf":
        raise LearnerError(f"your function returned an array of {out.dtype}, not of numbers: return the rounded x, a "
                           "bf16 array of x's shape")
    if out.shape != x.shape:
        raise LearnerError(f"return one rounded number per entry of x: shape {x.shape}, not {out.shape}")
    if out.dtype != _bf16():
        raise LearnerError(f"return a bf16 array (dtype('bfloat16'), or .astype(dtype('bfloat16'))), not {out.dtype}: "
                           "the point is what a weight stored in 16 bits holds")
    values = out.astype(np.float64)
    wild = ~np.isfinite(values) & np.isfinite(x)
    if np.any(wild):
        what = " and ".join(w for w, found in (("nan", np.isnan(values[wild]).any()),
                                               ("inf", np.isinf(values[wild]).any())) if found)
        raise LearnerError(f"the rounded array holds {what} where x is finite (at {np.argwhere(wild)[0].tolist()}): "
                           "a finite number rounds to one of its two finite bf16 neighbours (a 0/0 where the two "
                           "neighbours are equal?)")
    return values


def _run_rounding(fn, x):
    """Call fn(x, u) once per draw of u, on read-only copies; return (the share of draws that land above x, the
    share that are one of x's two bf16 neighbours), entry by entry.

    A known limit: the 64 draws measure the probability of going up to 1/64, so a probability computed in a
    coarser format (fp16's 11 bits, say) passes; one rounded to bf16's 8 bits does not (tests/course)."""
    draws = [_rounded(fn(read_only(x, copy=True), read_only(np.full(x.shape, u), copy=True)), x) for u in _DRAWS]
    below, above = _neighbours(x)  # only now: no frame holds x's neighbours while the learner's code runs
    up = sum((values > x).astype(np.float64) for values in draws)
    next_to_x = sum(((values == below) | (values == above)).astype(np.float64) for values in draws)
    return up / len(_DRAWS), next_to_x / len(_DRAWS)


def _rounding_cases():
    rng = np.random.default_rng(11)
    near_one = np.float32(1.0) + np.float32(2.0**-9) * np.arange(1, 4, dtype=np.float32)
    return [Case("hand-checkable", (np.array([1 + 2.0**-9], dtype=np.float32),),
                 detail="x = 1 + 2⁻⁹: bf16's neighbours are 1 and 1 + 2⁻⁷, a quarter of the way up"),
            Case("hand-checkable", (near_one,), detail="1 + 2⁻⁹, 1 + 2⁻⁸, 1 + 3·2⁻⁹: a quarter, a half, three quarters"),
            Case("negative numbers", (-near_one,), note="for a negative x, the neighbour above is the one nearer 0"),
            Case("bf16 numbers already", (np.array([1.0, -0.5, 0.0, 384.0, 2.0**-20], dtype=np.float32),),
                 note="a number bf16 holds exactly has nothing to round: it stays as it is, whatever u"),
            Case("a weight and a small update", (np.float32(0.71875) - np.float32(1e-4) * np.arange(1, 7, dtype=np.float32),),
                 detail="0.71875 − k · 10⁻⁴", note="the case that matters in training: an update much smaller "
                 "than bf16's gap, which rounding to nearest loses every time"),
            Case("random", (rng.standard_normal(50).astype(np.float32),)),
            Case("random, many scales", ((rng.standard_normal((4, 6)) * 10.0 ** rng.integers(-30, 30, (4, 6))).astype(np.float32),),
                 detail="a 4 × 6 array from 10⁻³⁰ to 10³⁰")]


def _draw_rounding(rng, pick):
    """A float32 array of the picked rank and kind of values: standard normal, negative, with zeros, tiny, huge."""
    shape = tuple(int(n) for n in rng.integers(1, 5, pick.rank))
    return Case(DRAWN, (sample(rng, shape, pick.values, np.float32),), detail=pick.said())


def _nearest(x, u):
    return x.astype(_bf16())


def _swapped(x, u):
    """The mistake: the probability of going up is the distance to the neighbour *above*."""
    below, above = _neighbours(x)
    gap = np.where(above > below, above - below, 1.0)
    return np.where(u < (above - x) / gap, above, below).astype(_bf16())


def _chopped(x, u):
    """The mistake: the lower 16 bits of the fp32 pattern simply dropped (toward 0), no randomness."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(_bf16())


def _coin(x, u):
    """The mistake: either neighbour with probability 1/2, however close x is to one of them."""
    below, above = _neighbours(x)
    return np.where(u < 0.5, above, below).astype(_bf16())


register(CodeExercise(
    key="07-stochastic-rounding",
    minutes=15,
    question="Round each entry of x (float32) to one of its two bf16 neighbours, below and above it: to the one "
             "above when u (uniform in [0, 1), one per entry) is below (x − below) / (above − below), else to the one "
             "below; a number bf16 holds exactly stays as it is. Return a bf16 array of x's shape.",
    signature="round_stochastic(x, u) -> bf16 array",
    reference=round_stochastic,
    cases=_rounding_cases,
    outputs=("the share of draws rounded above x", "the share of draws that are one of x's two bf16 neighbours"),
    run=_run_rounding,
    in_place=("x and u are the caller's arrays (a weight in training is still needed as it is): make a new array "
              "(np.where(...), x.astype(...)) instead of writing into them"),
    domain=Domain(_draw_rounding, ranks=(0, 1, 2, 3), dtypes=(np.float32,), values=VALUES),
    mistakes=[
        Mistake("rounding to the nearest",
                "astype rounds every entry to the nearest bf16 number, whatever u: an update smaller than half the gap "
                "is lost every time, which is the very problem. Go to the neighbour above with probability "
                "(x − below) / (above − below).", _nearest),
        Mistake("the probabilities swapped",
                "(above − x) / (above − below) is the probability of going *down*: x close to the neighbour below "
                "would mostly go up. On average that is not x.", _swapped),
        Mistake("chopping the lower bits",
                "dropping the last 16 bits of the fp32 pattern rounds every entry toward 0, whatever u: biased, and "
                "small updates are lost as with rounding to nearest. Keep the 16 bits as a probability.", _chopped),
        Mistake("a fair coin",
                "each neighbour with probability 1/2 is not x on average unless x lies halfway: the probability of "
                "going up is how far x lies from the neighbour below, as a share of the gap.", _coin),
    ],
    hints=("The two neighbours: x.astype(dtype('bfloat16')) is the nearest; np.nextafter(that, ±inf), in bf16, "
           "gives the next one down or up.",
           "below ≤ x ≤ above; p = (x − below) / (above − below) (0 where they are equal); np.where(u < p, above, "
           "below)."),
))
