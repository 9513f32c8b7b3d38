"""The checkers of 06-checkpoint, 07-update-scale, 07-unscale-then-clip and 07-stochastic-rounding against wrong code written the way
learners write it (none of it taken from the checkers' lists of named mistakes), and against right code written in
other forms than the course's."""
import tracemalloc

import math

import numpy as np
import pytest

from haaw import Tensor, no_grad
from haaw.amp import dtype
from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import Function
from haaw.engine import guard


# --- 06-checkpoint: memory kept anywhere, and arrays where Tensors are needed ---------------------------------


class KeepsAListOnCtx(Function):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x
        ctx.kept = [out]  # "in case backward wants it"
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsOnTheClass(Function):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x
        KeepsOnTheClass.last = out  # to look at it afterwards
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


OUTPUTS = {}


class KeepsInAGlobalDict(Function):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x
        OUTPUTS[id(ctx)] = out.data
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


def keeps_in_a_closure():
    history = []

    class CheckpointSegment(Function):
        @staticmethod
        def forward(ctx, fn, x):
            with no_grad():
                out = fn(Tensor(x))
            ctx.fn, ctx.x = fn, x
            history.append(out)
            return out.data

        @staticmethod
        def backward(ctx, g):
            x = Tensor(ctx.x, requires_grad=True)
            ctx.fn(x).backward(g)
            return None, x.grad
    return CheckpointSegment


class KeepsOnlyLargeOutputs(Function):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x
        if x.size > 100:  # "recomputing a big segment is slow: cache it"
            ctx.out = out.data
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsOnTheFunction(Function):  # of my own: an attribute of fn, which ctx.fn holds
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        fn.cache = out.data
        ctx.fn, ctx.x = fn, x
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsInADefaultArgument(Function):  # of my own: the mutable default that outlives every call
    @staticmethod
    def forward(ctx, fn, x, _memo=[]):  # noqa: B006  (the mistake itself)
        with no_grad():
            out = fn(Tensor(x))
        _memo.append(out.data)
        ctx.fn, ctx.x = fn, x
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsAHalfPrecisionCopy(Function):  # of my own: "half the memory" is still memory kept
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x, ctx.small = fn, x, out.data.astype(np.float16)
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsALambda(Function):  # of my own: "backward can call it if it wants the output"
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x, ctx.output = fn, x, lambda: out
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsAGenerator(Function):  # no place the checker walks: the bytes are still counted
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x, ctx.outputs = fn, x, (o for o in [out.data])
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


@pytest.mark.parametrize("cls, where", [
    (KeepsALambda, "ctx.output (96 bytes)"),
    (KeepsAGenerator, "96 bytes of arrays alive besides x: in a place the checker cannot name"),
    (KeepsAListOnCtx, "ctx.kept (96 bytes)"),
    (KeepsOnTheClass, "KeepsOnTheClass.last (96 bytes)"),
    (KeepsInAGlobalDict, "the global OUTPUTS (96 bytes)"),
    (keeps_in_a_closure(), "the closure variable history (96 bytes)"),
    (KeepsOnlyLargeOutputs, "ctx.out (32,768 bytes)"),
    (KeepsOnTheFunction, "ctx.fn.cache (96 bytes)"),
    (KeepsInADefaultArgument, "the default argument _memo (96 bytes)"),
    (KeepsAHalfPrecisionCopy, "ctx.small (24 bytes)"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_memory_kept_anywhere_is_refused_and_named_with_its_bytes(cls, where):
    feedback = check("06-checkpoint", cls)
    assert feedback.status == WRONG, feedback.message
    assert "bytes kept by the forward pass, besides x: wrong values" in feedback.message, feedback.message
    assert "your forward pass left" in feedback.message and where in feedback.message, feedback.message


def test_keeping_the_output_is_named_as_such_wherever_it_is_kept():
    for cls in (KeepsAListOnCtx, KeepsOnTheClass, KeepsInAGlobalDict, KeepsOnTheFunction):
        message = check("06-checkpoint", cls).message
        assert "This looks like keeping the output as well" in message, (cls.__name__, message)
    for cls in (KeepsOnlyLargeOutputs, KeepsAHalfPrecisionCopy):  # not the output on every case: not named
        message = check("06-checkpoint", cls).message
        assert "This looks like" not in message, (cls.__name__, message)


class ForwardOnTheArray(Function):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn, ctx.x = fn, x
        with no_grad():
            return fn(x).data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class BackwardOnTheArray(Function):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn, ctx.x = fn, x
        with no_grad():
            return fn(Tensor(x)).data

    @staticmethod
    def backward(ctx, g):
        out = ctx.fn(ctx.x)
        out.backward(g)
        return None, ctx.x.grad


class BackwardMarksTheArray(Function):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn, ctx.x = fn, x
        with no_grad():
            return fn(Tensor(x)).data

    @staticmethod
    def backward(ctx, g):
        x = ctx.x
        x.requires_grad = True
        ctx.fn(Tensor(x)).backward(g)
        return None, x.grad


@pytest.mark.parametrize("cls, line", [
    (ForwardOnTheArray, "of forward: return fn(x).data"),
    (BackwardOnTheArray, "of backward: out = ctx.fn(ctx.x)"),
    (BackwardMarksTheArray, "of backward: x.requires_grad = True"),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_a_numpy_array_where_a_tensor_is_needed_is_told_to_wrap_it_at_its_line(cls, line):
    feedback = check("06-checkpoint", cls)
    assert feedback.status == WRONG, feedback.message
    assert "wrap it in Tensor" in feedback.message and line in feedback.message, feedback.message


class KeepsACopyOfX(Function):
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        ctx.fn, ctx.x = fn, x.copy()
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class SavesForBackward(Function):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn = fn
        ctx.save_for_backward(x)
        with no_grad():
            return fn(Tensor(x)).data

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x = Tensor(x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


class KeepsXAsATensor(Function):
    @staticmethod
    def forward(ctx, fn, x):
        ctx.fn, ctx.x = fn, Tensor(x, requires_grad=True)
        with no_grad():
            return fn(ctx.x).data

    @staticmethod
    def backward(ctx, g):
        ctx.fn(ctx.x).backward(g)
        return None, ctx.x.grad


@pytest.mark.parametrize("cls", [KeepsACopyOfX, SavesForBackward, KeepsXAsATensor], ids=lambda c: c.__name__)
def test_right_forms_of_checkpointing_pass(cls):
    feedback = check("06-checkpoint", cls)
    assert feedback.status == CORRECT, feedback.message


def test_the_memory_check_holds_when_something_else_traces_memory_already():
    """With tracemalloc already on (someone profiling), the checker counts what it finds, and leaves tracing on."""
    tracemalloc.start()
    try:
        assert check("06-checkpoint", guard.unguarded(REGISTRY["06-checkpoint"].reference)).status == CORRECT
        for cls in (KeepsOnTheClass, KeepsInAGlobalDict, KeepsOnlyLargeOutputs):
            feedback = check("06-checkpoint", cls)
            assert feedback.status == WRONG and "your forward pass left" in feedback.message, feedback.message
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


class LeavesACycleOfGarbage(Function):  # right: its scratch dict is garbage once forward returns, if in a cycle
    @staticmethod
    def forward(ctx, fn, x):
        with no_grad():
            out = fn(Tensor(x))
        scratch = {"out": out.data.copy()}
        scratch["itself"] = scratch  # a reference cycle: freed by a collection, not when forward returns
        ctx.fn, ctx.x = fn, x
        return out.data

    @staticmethod
    def backward(ctx, g):
        x = Tensor(ctx.x, requires_grad=True)
        ctx.fn(x).backward(g)
        return None, x.grad


def test_garbage_in_a_reference_cycle_is_not_counted_as_kept():
    """Arrays in a cycle that nothing reaches are freed by a collection, not counted as kept. Python's own
    collections are off here, so only the checker's can free the cycle."""
    import gc

    gc.disable()
    try:
        feedback = check("06-checkpoint", LeavesACycleOfGarbage)
    finally:
        gc.enable()
    assert feedback.status == CORRECT, feedback.message


@pytest.mark.slow  # it builds a large session's worth of objects to collect
def test_a_large_session_does_not_slow_the_memory_check():
    """The checker's collection looks at what the forward pass made alone (the objects before it are frozen), so a
    session holding many objects takes no longer to check: a class that keeps arrays where no place shows them makes
    the checker collect at every case it runs, 11 here."""
    import gc
    import time

    session = [[i, (i,)] for i in range(300_000)]  # a notebook's, or a test run's, objects
    start = time.perf_counter()
    gc.collect()
    whole = time.perf_counter() - start
    start = time.perf_counter()
    feedback = check("06-checkpoint", KeepsAGenerator)
    took = time.perf_counter() - start
    assert feedback.status == WRONG and "in a place the checker cannot name" in feedback.message
    assert took < 5 * whole, (took, whole)  # 11 collections of the whole session would take 11 times one
    del session


# --- 07-update-scale: no cap, separate factors, and any sequence of two numbers --------------------------------


def update_capped_at_fp16_max(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return min(scale * growth_factor, 65504.0), 0  # "the scale must stay an fp16 number"
    return scale, good_steps


def update_capped_at_2_to_the_24(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return min(scale * growth_factor, 2.0**24), 0
    return scale, good_steps


def update_backing_off_by_the_growth_factor(scale, good_steps, found_inf, growth_factor, backoff_factor,
                                            growth_interval):  # of my own: "backing off undoes a growth"
    if found_inf:
        return scale / growth_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


def update_growing_by_the_backoff_factor(scale, good_steps, found_inf, growth_factor, backoff_factor,
                                         growth_interval):  # of my own: the other way round
    if found_inf:
        return scale * backoff_factor, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale / backoff_factor, 0
    return scale, good_steps


def update_counting_the_overflow_step(scale, good_steps, found_inf, growth_factor, backoff_factor,
                                      growth_interval):  # of my own: no else, so the skipped step counts as clean
    if found_inf:
        scale = scale * backoff_factor
        good_steps = 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


def update_halving_by_floor_division(scale, good_steps, found_inf, growth_factor, backoff_factor,
                                     growth_interval):  # of my own: // for "divide", as with the counts
    if found_inf:
        return scale // (1 / backoff_factor), 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * growth_factor, 0
    return scale, good_steps


@pytest.mark.parametrize("fn, words", [
    (update_capped_at_fp16_max, "Your scales are GradScaler's with a cap at 65,504"),
    (update_capped_at_2_to_the_24, "Your scales are GradScaler's with a cap at 16,777,216"),
    (update_backing_off_by_the_growth_factor, "growth_factor and backoff_factor are two separate settings"),
    (update_growing_by_the_backoff_factor, "growth_factor and backoff_factor are two separate settings"),
    (update_counting_the_overflow_step, "overflows at steps 3 and 4: the scale after each step: wrong values"),
    (update_halving_by_floor_division, "overflows that take the scale below 1: the scale after each step"),
], ids=lambda v: getattr(v, "__name__", None))
def test_wrong_loss_scalers_are_refused_and_told_what_they_did(fn, words):
    feedback = check("07-update-scale", fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message  # none of them is one of the named mistakes
    if "cap at" not in words:
        assert "cap at" not in feedback.message


def update_as_a_list(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        return [scale * backoff_factor, 0]
    good_steps += 1
    if good_steps == growth_interval:
        return [scale * growth_factor, 0]
    return [scale, good_steps]


def update_as_an_array(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    if found_inf:
        scale, good_steps = scale * backoff_factor, 0
    else:
        good_steps += 1
        if good_steps == growth_interval:
            scale, good_steps = scale * growth_factor, 0
    return np.array([scale, good_steps])


def update_with_numpy_numbers(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    scale, good_steps = np.float32(scale), np.int64(good_steps)
    if found_inf:
        return scale * np.float32(backoff_factor), np.int64(0)
    good_steps += 1
    if good_steps >= growth_interval:
        return scale * np.float32(growth_factor), np.int64(0)
    return scale, good_steps


@pytest.mark.parametrize("fn", [update_as_a_list, update_as_an_array, update_with_numpy_numbers],
                         ids=lambda f: f.__name__)
def test_any_sequence_of_two_numbers_is_accepted(fn):
    feedback = check("07-update-scale", fn)
    assert feedback.status == CORRECT, feedback.message


@pytest.mark.parametrize("result", [(1.0,), (1.0, 0, 0), "ab", {"scale": 1.0, "good_steps": 0}, np.ones((2, 1)),
                                    (1.0, None)], ids=repr)
def test_what_is_not_two_numbers_is_refused_and_shown(result):
    feedback = check("07-update-scale", lambda *args: result)
    assert feedback.status == WRONG and "return two numbers, (new scale, new count of clean steps)" in \
        feedback.message, feedback.message


@pytest.mark.slow  # 2 s: it runs PyTorch's GradScaler on every pattern
def test_the_patterns_beyond_the_file_are_what_pytorch_s_gradscaler_does():
    pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    from haaw.course.exercises.nb07 import BEYOND_THE_FILE

    path = Path(__file__).resolve().parents[2] / "scripts" / "make_reference_data.py"
    spec = importlib.util.spec_from_file_location("make_reference_data", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for p in BEYOND_THE_FILE:
        settings = {k: p[k] for k in ("init_scale", "growth_factor", "backoff_factor", "growth_interval")}
        assert script.scaler_sequence(found_inf=p["found_inf"], **settings) == p["scales"], p["label"]
    assert max(max(p["scales"]) for p in BEYOND_THE_FILE) > 2**24


# --- 07-unscale-then-clip: overflows in later gradients, nan, and clipping first ------------------------------


def clip_checking_the_first_gradient(grads, scale, max_norm):
    grads = [g / scale for g in grads]
    if not np.all(np.isfinite(grads[0])):
        return grads, float("inf"), True
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def clip_checking_for_inf_only(grads, scale, max_norm):
    grads = [g / scale for g in grads]
    if any(np.isinf(g).any() for g in grads):
        return grads, float("inf"), True
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def clip_checking_the_norm_against_inf(grads, scale, max_norm):  # of my own: the norm is inf if any entry is
    grads = [g / scale for g in grads]
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    if norm == float("inf"):
        return grads, norm, True
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def clip_first_returning_the_scaled_norm(grads, scale, max_norm):
    if any(not np.all(np.isfinite(g)) for g in grads):
        return [g / scale for g in grads], float("inf"), True
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor / scale for g in grads], norm, False


def clip_first_returning_the_norm_of_the_result(grads, scale, max_norm):
    if any(not np.all(np.isfinite(g)) for g in grads):
        return [g / scale for g in grads], float("inf"), True
    norm = np.sqrt(sum(np.sum(g ** 2) for g in grads))
    factor = min(1.0, max_norm / (norm + 1e-6))
    grads = [g * factor / scale for g in grads]
    return grads, np.sqrt(sum(np.sum(g ** 2) for g in grads)), False


def clip_leaving_the_norm_nan(grads, scale, max_norm):  # of my own: found_inf from the norm, returned as it came
    grads = [g / scale for g in grads]
    norm = np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads))
    if not np.isfinite(norm):
        return grads, norm, True
    factor = min(1.0, max_norm / (norm + 1e-6))
    return [g * factor for g in grads], norm, False


def clip_each_gradient_on_its_own(grads, scale, max_norm):  # of my own: per-tensor norms, not the global one
    grads = [g / scale for g in grads]
    if any(not np.all(np.isfinite(g)) for g in grads):
        return grads, float("inf"), True
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads)))
    return [g * min(1.0, max_norm / (np.linalg.norm(g) + 1e-6)) for g in grads], norm, False


CLIPPING_FIRST = "Your gradients are what clipping before unscaling gives, on every case"


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # inf · 0 in the learners' code
@pytest.mark.parametrize("fn, words", [
    (clip_checking_the_first_gradient, "gradient 3 of 3 holds inf (the ones before it are finite): every gradient "
                                       "has to be looked at"),
    (clip_checking_for_inf_only, "gradient 1 of 1 holds nan. The nan was not caught"),
    (clip_checking_the_norm_against_inf, "The nan was not caught"),
    (clip_first_returning_the_scaled_norm, CLIPPING_FIRST),
    (clip_first_returning_the_norm_of_the_result, CLIPPING_FIRST),
    (clip_leaving_the_norm_nan, "on an overflow the norm to return is inf (float('inf')), not nan"),
    (clip_each_gradient_on_its_own, "a norm over max_norm: the gradients: wrong values"),
], ids=lambda v: getattr(v, "__name__", None))
def test_wrong_unscaling_is_refused_and_told_what_it_did(fn, words):
    feedback = check("07-unscale-then-clip", fn)
    assert feedback.status == WRONG, feedback.message
    assert words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message, feedback.message
    if words != CLIPPING_FIRST:
        assert "clipping before unscaling" not in feedback.message


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_an_overflow_only_in_a_later_gradient_is_its_own_case_for_inf_and_for_nan():
    feedback = check("07-unscale-then-clip", clip_checking_the_first_gradient)
    assert "only the last of three gradients holds inf" in feedback.message, feedback.message

    def catches_inf_everywhere_but_nan_in_the_first_only(grads, scale, max_norm):
        unscaled = [g / scale for g in grads]
        if any(np.isinf(g).any() for g in unscaled) or np.isnan(unscaled[0]).any():
            return unscaled, float("inf"), True
        return clip_checking_for_inf_only(grads, scale, max_norm)
    feedback = check("07-unscale-then-clip", catches_inf_everywhere_but_nan_in_the_first_only)
    assert feedback.status == WRONG and "only the last of three gradients holds nan" in feedback.message, \
        feedback.message
    assert "gradient 3 of 3 holds nan (the ones before it are finite)" in feedback.message


def test_clipping_before_unscaling_with_the_true_norm_is_still_the_named_mistake_said_once():
    mistake = next(m for m in REGISTRY["07-unscale-then-clip"].mistakes if m.name == "clipping before unscaling")
    feedback = check("07-unscale-then-clip", mistake.code)
    assert "This looks like clipping before unscaling" in feedback.message and CLIPPING_FIRST not in \
        feedback.message, feedback.message


def clip_as_tuples_without_epsilon(grads, scale, max_norm):
    grads = tuple(g / scale for g in grads)
    if not all(np.isfinite(g).all() for g in grads):
        return grads, float("inf"), np.True_
    norm = np.linalg.norm(np.concatenate([g.ravel() for g in grads]))
    if norm > max_norm:
        grads = tuple(g * (max_norm / norm) for g in grads)
    return grads, norm, np.False_


def clip_checking_before_unscaling(grads, scale, max_norm):
    if any((~np.isfinite(g)).any() for g in grads):  # inf / scale is inf: checking first is the same
        return [g / scale for g in grads], np.inf, True
    grads = [g / scale for g in grads]
    norm = float(np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads)))
    scale_by = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale_by for g in grads], norm, False


@pytest.mark.parametrize("fn", [clip_as_tuples_without_epsilon, clip_checking_before_unscaling],
                         ids=lambda f: f.__name__)
def test_right_forms_of_unscaling_and_clipping_pass(fn):
    feedback = check("07-unscale-then-clip", fn)
    assert feedback.status == CORRECT, feedback.message


def test_unscale_and_clip_that_divides_by_a_zero_norm_is_refused():
    """Python floats: max_norm / norm raises at norm 0, which a gradient of zeros has."""
    def unscale_and_clip_plain_division(grads, scale, max_norm):
        grads = [np.asarray(g, dtype=np.float64) / scale for g in grads]
        if not all(np.all(np.isfinite(g)) for g in grads):
            return grads, float("inf"), True
        norm = math.sqrt(sum(float(np.sum(g * g)) for g in grads))
        factor = min(1.0, max_norm / norm)
        return [g * factor for g in grads], norm, False

    feedback = check("07-unscale-then-clip", unscale_and_clip_plain_division)
    assert feedback.status == WRONG and "all zero" in feedback.message and "ZeroDivisionError" in feedback.message


# --- 07-stochastic-rounding: wrong implementations of my own, each refused -----------------------------------


def _bf16():
    return dtype("bfloat16")


def round_by_the_bits(x, u):  # right, another way: the lower 16 bits of the pattern are the chance of going up
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    up = (u * 65536) < (bits & np.uint32(0xFFFF))
    return ((bits & np.uint32(0xFFFF0000)) + (up.astype(np.uint32) << np.uint32(16))).view(np.float32).astype(_bf16())


def round_on_magnitudes(x, u):  # right, a third way: round |x| (away from 0 with its chance), then put the sign back
    m = np.abs(x).astype(np.float64)
    low = np.abs(x).astype(_bf16()).astype(np.float64)
    low = np.where(low > m, np.nextafter(np.abs(x).astype(_bf16()), _bf16().type(0)).astype(np.float64), low)
    high = np.nextafter(low.astype(_bf16()), _bf16().type(np.inf)).astype(np.float64)
    p = np.where(m > low, (m - low) / (high - low), 0.0)
    return (np.sign(x) * np.where(u < p, high, low)).astype(_bf16())


def round_returning_float32(x, u):  # the right numbers, in the wrong format
    return round_by_the_bits(x, u).astype(np.float32)


def round_ignoring_the_sign(x, u):  # the neighbours of |x|, the sign lost
    return round_by_the_bits(np.abs(x), u)


def round_up_only_on_u_above_p(x, u):  # u > p as the test: up with chance 1 − p, the swapped probabilities again
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    r = bits & np.uint32(0xFFFF)
    up = (r > 0) & ((u * 65536) > r)
    return ((bits & np.uint32(0xFFFF0000)) + (up.astype(np.uint32) << np.uint32(16))).view(np.float32).astype(_bf16())


def round_with_fp16_gaps(x, u):  # fp16's neighbours, stored in bf16: not bf16's neighbours of x
    near = x.astype(np.float16)
    below = np.where(near <= x, near, np.nextafter(near, np.float16(-np.inf))).astype(np.float64)
    above = np.where(near >= x, near, np.nextafter(near, np.float16(np.inf))).astype(np.float64)
    gap = np.where(above > below, above - below, 1.0)
    return np.where(u < (x - below) / gap, above, below).astype(_bf16())


def round_with_one_u_for_all(x, u):  # the first u used for every entry: same shares, as each case draws u alike
    return round_by_the_bits(x, np.full(x.shape, u.flat[0]))


@pytest.mark.parametrize("fn", [round_by_the_bits, round_on_magnitudes, round_with_one_u_for_all],
                         ids=lambda f: f.__name__)
def test_right_forms_of_stochastic_rounding_pass(fn):
    assert check("07-stochastic-rounding", fn).correct


@pytest.mark.filterwarnings("ignore:overflow encountered", "ignore:invalid value encountered")
@pytest.mark.parametrize("fn, words", [
    (round_returning_float32, "return a bf16 array"),
    (round_ignoring_the_sign, "negative numbers"),
    (round_with_fp16_gaps, "wrong values"),
], ids=lambda v: getattr(v, "__name__", None))
def test_wrong_stochastic_rounding_is_refused(fn, words):
    feedback = check("07-stochastic-rounding", fn)
    assert feedback.status == WRONG and words in feedback.message, feedback.message
    assert "This looks like" not in feedback.message, feedback.message


@pytest.mark.parametrize("name", ["rounding to the nearest", "the probabilities swapped", "chopping the lower bits",
                                  "a fair coin"])
def test_each_named_rounding_mistake_is_named(name):
    mistake = next(m for m in REGISTRY["07-stochastic-rounding"].mistakes if m.name == name)
    feedback = check("07-stochastic-rounding", mistake.code)
    assert feedback.status == WRONG and f"This looks like {name}:" in feedback.message, feedback.message


def test_going_up_when_u_is_above_p_is_named_as_the_swapped_probabilities():
    feedback = check("07-stochastic-rounding", round_up_only_on_u_above_p)
    assert feedback.status == WRONG and "This looks like the probabilities swapped:" in feedback.message


def test_stochastic_rounding_refuses_the_course_s_own():
    from haaw.course import nb07

    feedback = check("07-stochastic-rounding", lambda x, u: nb07.round_stochastic(x, u))
    assert feedback.status == WRONG and "not its own work" in feedback.message, feedback.message
