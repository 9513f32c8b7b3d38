"""Exercises of notebook 06: memory, and saving activations or recomputing them."""
import contextlib
import gc
import tracemalloc
import types

import numpy as np

from ...engine import Function, guard, no_grad, Tensor
from ...engine.graph import context
from ...nn import Linear
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import NumberExercise, register
from .domain import DRAWN, Domain

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
        if not isinstance(h, Tensor):  # the layers would fail deep inside with an AttributeError; say it here
            given = "NumPy array" if isinstance(h, np.ndarray) else type(h).__name__
            raise TypeError(f"fn works on Tensors, and it was given a {given}: forward and backward receive NumPy "
                            "arrays (x, ctx.x), so wrap it in Tensor: fn(Tensor(x)) in forward, "
                            "fn(Tensor(ctx.x, requires_grad=True)) in backward")
        for layer in layers:
            h = layer(h).tanh()
        return h
    return fn, layers


# --- what the forward pass leaves alive for backward ---------------------------------------------------
# Every NumPy array's memory is reported to tracemalloc (in NumPy's own domain), whoever holds the array: ctx, a list,
# the class, a global, a closure. So the checker traces the forward pass, takes the output array away from the output
# Tensor (the graph holds the output anyway), and what is still traced is what the forward pass kept.

_NUMPY_DOMAIN = np.lib.tracemalloc_domain
_ARRAY_DOMAIN = [tracemalloc.DomainFilter(True, _NUMPY_DOMAIN)]


def _traced_bytes() -> int:
    """Bytes of every NumPy array allocated since tracing began (or held since, if it was on before) and alive."""
    return sum(trace.size for trace in tracemalloc.take_snapshot().filter_traces(_ARRAY_DOMAIN).traces)


def _owner(a: np.ndarray) -> np.ndarray:
    """The array that owns a view's memory (the array itself if it owns its own)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _arrays_in(value, path: str, seen: set, budget: list) -> list:
    """(where, array) for the arrays reachable from ``value``, found at ``path``: in Tensors (with the graph recorded
    behind them), lists, tuples, sets, dicts, objects' attributes, functions' attributes (fn.cache = ...) and
    closures. An attribute gets its own name (ctx.fn.cache); what is inside a container, a closure or a Tensor is
    named by it. Modules, classes and other code are not walked; ``budget`` caps how many objects are visited."""
    found, stack = [], [(value, path)]
    while stack and budget[0] > 0:
        value, path = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        budget[0] -= 1
        if isinstance(value, np.ndarray):
            found.append((path, value))
        elif isinstance(value, Tensor):
            ctx = context(value)
            graph = path if path.startswith("the graph recorded behind ") else f"the graph recorded behind {path}"
            stack += [(v, graph) for v in (*getattr(value, "_parents", ()), *(vars(ctx).values() if ctx else ()))]
            stack += [(value.data, path), (value.grad, path)]  # popped first: the Tensor's own array is named by it
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack += [(v, path) for v in value]
        elif isinstance(value, dict):
            stack += [(v, path) for v in value.values()]
        elif isinstance(value, types.FunctionType):  # its attributes, and what its closure holds (a lambda: out)
            stack += [(v, f"{path}.{name}") for name, v in vars(value).items()]
            for cell in value.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    stack.append((cell.cell_contents, path))
        elif isinstance(value, (types.ModuleType, type)) or callable(value):
            continue
        elif hasattr(value, "__dict__"):
            stack += [(v, f"{path}.{name}") for name, v in vars(value).items()]
    return found


def _places(cls, ctx, fn):
    """(name, value) for every place a forward pass may keep something in: ctx's attributes, fn's attributes, the
    class's attributes, and the globals, closure variables and default arguments of the class's methods."""
    yield from ((f"ctx.{name}", value) for name, value in (vars(ctx).items() if ctx is not None else ()))
    yield from ((f"fn.{name}", value) for name, value in vars(fn).items())
    for klass in cls.__mro__:
        if klass in (Function, object):
            break
        for name, value in vars(klass).items():
            if not name.startswith("__") and not isinstance(value, (staticmethod, classmethod, property)) \
                    and not callable(value):
                yield f"{klass.__name__}.{name}", value
    for method in {id(m): m for m in (guard.unguarded(getattr(cls, n)) for n in ("forward", "backward"))}.values():
        code = getattr(method, "__code__", None)
        if code is None:
            continue
        names, codes = set(), [code]
        while codes:  # the names used by the method and by the functions and comprehensions inside it
            c = codes.pop()
            names.update(c.co_names)
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        for name in sorted(names):
            value = method.__globals__.get(name)
            if isinstance(value, type) and value not in (cls, Function, Tensor) and value.__module__ != "builtins":
                yield from ((f"{value.__name__}.{attr}", v) for attr, v in vars(value).items()
                            if not attr.startswith("__") and not callable(v))
            elif name in method.__globals__:
                yield f"the global {name}", value
        for name, cell in zip(code.co_freevars, method.__closure__ or ()):
            with contextlib.suppress(ValueError):  # an empty cell
                yield f"the closure variable {name}", cell.cell_contents
        defaults = method.__defaults__ or ()
        for name, value in zip(code.co_varnames[code.co_argcount - len(defaults):code.co_argcount], defaults):
            yield f"the default argument {name}", value
        yield from ((f"the default argument {name}", value) for name, value in (method.__kwdefaults__ or {}).items())


class _Kept:
    """What a forward pass left alive for backward: ``bytes`` in all, besides the output and copies of x; ``where``,
    the places found holding it and their bytes."""

    def __init__(self, total: int, where: list):
        self.bytes, self.where = total, where

    def __str__(self) -> str:
        if self.bytes <= 0:
            return ""
        named = sum(n for _, n in self.where)
        said = [f"{place} ({n:,} bytes)" for place, n in self.where]
        if self.bytes > named:
            said.append(f"{self.bytes - named:,} bytes held somewhere the checker cannot name" if said else
                        "in a place the checker cannot name (a global, a class attribute, a closure?)")
        return (f"Between forward and backward, your forward pass left {self.bytes:,} bytes of arrays alive besides x: "
                + "; ".join(said) + ". Backward recomputes everything from x: keep x (and fn) alone, on ctx.")


def _forward_measured(cls, fn, x: Tensor, known=()):
    """``cls.apply(fn, x)``, and what its forward pass left alive (a _Kept): every array it allocated that is still
    referenced once it has returned, wherever that is, except the output (the graph holds it anyway: it is counted
    only if something else keeps it too) and copies of x. ``known``: arrays that existed before (the parameters).

    Tracing is started for the forward pass alone, so what it traces is exactly what the forward pass allocated. If
    something else traces already, its totals mix in arrays from before (and one freed during the forward pass, say
    a class attribute overwritten, would hide a new one): then only the arrays found in the places that
    ``_places`` walks, and not there before, are counted."""
    ours = not tracemalloc.is_tracing()
    old = {id(_owner(a)) for a in (x.data, *known)}
    held = []  # others' tracing: what the places hold before, kept alive here so that no new array takes its id
    if not ours:
        held = [_owner(a) for place, value in _places(cls, None, fn)
                for _, a in _arrays_in(value, place, set(), [20_000])]
        old |= {id(a) for a in held}
    else:
        tracemalloc.start()
    # every object older than this forward pass set aside, so that a collection below looks at its objects alone:
    # a whole collection of a large session (a notebook's, a test run's) takes a quarter of a second or more
    frozen = ours and gc.get_freeze_count() == 0
    if frozen:
        gc.freeze()
    try:
        out = cls.apply(fn, x)
        if not isinstance(out, Tensor) or not out.requires_grad:
            raise LearnerError("apply(fn, x) must give a Tensor that is part of the graph: does forward return "
                               "out.data, the array?")
        values = out.data.copy()
        out.data, values = values, out.data  # the output Tensor's array is now one made here, counted out below
        del values

        def new(a):
            return (tracemalloc.get_object_traceback(a) is not None) if ours else id(a) not in old

        seen, budget, where, copies = {id(out.data), id(x.data)}, [20_000], {}, 0
        counted = set()
        for place, value in _places(cls, context(out), fn):
            for path, a in _arrays_in(value, place, seen, budget):
                a = _owner(a)
                if id(a) in counted or not new(a):
                    continue
                counted.add(id(a))
                if a.shape == x.data.shape and np.array_equal(a, x.data):
                    copies += a.nbytes  # a copy of x is x: keeping it is allowed
                else:
                    where[path] = where.get(path, 0) + a.nbytes
        if ours:
            kept = _traced_bytes() - out.data.nbytes - copies
            if kept > sum(where.values()):  # what no place holds may be garbage in a reference cycle: collect it
                gc.collect()  # (what a place holds is alive: no need to pay for a collection then)
                kept = _traced_bytes() - out.data.nbytes - copies
        else:
            kept = sum(where.values())
    finally:
        if frozen:
            gc.unfreeze()
        if ours:
            tracemalloc.stop()
    return out, _Kept(max(0, kept), list(where.items()))


def _run_checkpoint(cls, width, depth, batch, seed):
    if not (isinstance(cls, type) and issubclass(cls, Function)):
        raise LearnerError(f"pass your class itself, a subclass of Function; got {type(cls).__name__}")
    fn, layers = _segment(width, depth, seed)
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((batch, width)), requires_grad=True)
    G = rng.standard_normal((batch, width))
    parameters = [p.data for layer in layers for p in layer.parameters()]
    try:
        out, kept = _forward_measured(cls, fn, x, parameters)
        out.backward(G)
    except AttributeError as err:  # a Tensor's attribute asked of a NumPy array: say what to wrap
        if "'numpy.ndarray' object has no attribute" not in str(err):
            raise
        raise AttributeError(f"{err}. forward and backward receive NumPy arrays (x, g), and ctx.x is one too: to "
                             "use it as a Tensor (requires_grad, .grad, .backward), wrap it in Tensor, as "
                             "Tensor(ctx.x, requires_grad=True)").with_traceback(err.__traceback__) from None
    params = [p.grad if p.grad is not None else np.zeros_like(p.data) for layer in layers for p in layer.parameters()]
    dx = x.grad if x.grad is not None else np.zeros_like(x.data)
    return out.data, dx, np.concatenate([p.ravel() for p in params]), np.array(float(kept.bytes))


def _what_was_kept(cls, width, depth, batch, seed) -> str:
    """On a failed case: what the forward pass left alive, and where, in bytes."""
    fn, layers = _segment(width, depth, seed)
    x = Tensor(np.random.default_rng(seed).standard_normal((batch, width)), requires_grad=True)
    said = str(_forward_measured(cls, fn, x, [p.data for layer in layers for p in layer.parameters()])[1])
    if not said:
        return ""  # nothing to add: the checker adds no line
    return said


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


def _draw_checkpoint(rng, pick):
    """A segment of 1 to 5 layers of width 3 to 32 on a batch of the pick's count of rows: from one row, where an
    array kept besides x is a few hundred bytes, to thousands of numbers, where keeping activations shows."""
    width, depth = int(rng.integers(3, 33)), int(rng.integers(1, 6))
    return Case(DRAWN, (width, depth, pick.count, int(rng.integers(10, 1000))),
                detail=f"{depth} layers of width {width}, batch {pick.count}: x holds {width * pick.count:,} numbers")


register(CodeExercise(
    key="06-checkpoint",
    minutes=25,
    refuses=("function.Checkpoint", "torch.autograd"),  # its backward runs the engine's backward, as PyTorch's does
    question="Write checkpointing as a custom operation: CheckpointSegment.apply(fn, x) returns fn(x), but its forward "
             "runs fn without recording anything and keeps only what backward needs, fn and x (no array but x); its "
             "backward runs fn again on x (this time "
             "recording, with x requiring a gradient), pushes g back through it, and returns one gradient per "
             "argument of forward (None for fn).",
    signature="class CheckpointSegment(Function) with forward(ctx, fn, x) and backward(ctx, g)",
    reference=CheckpointSegment,
    cases=lambda: [Case("two layers", (4, 2, 3, 0), detail="width 4"), Case("three layers", (8, 3, 5, 1), detail="width 8"),
                   Case("six layers", (16, 6, 4, 2), detail="width 16"),
                   # activations of thousands of numbers: code that keeps them only past some size is caught here
                   # (long and narrow: matrices this small are multiplied on one thread, quickly on a busy machine)
                   Case("thousands of numbers", (16, 4, 256, 3), detail="width 16, batch 256: x holds 4,096 numbers"),
                   Case("thousands of numbers", (32, 3, 160, 4), detail="width 32, batch 160: x holds 5,120 numbers")],
    outputs=("the output", "dL/dx", "the parameters' gradients", "bytes kept by the forward pass, besides x"),
    run=_run_checkpoint,
    domain=Domain(_draw_checkpoint, counts=(1, 2, 64, 200)),
    diagnose=_what_was_kept,
    mistakes=[
        Mistake("a forward that records",
                "running fn with recording on keeps every activation inside it until backward: exactly what "
                "checkpointing is meant to avoid. Run it under no_grad() and keep only x.",
                _KeepsEverything),
        Mistake("a recomputation whose input needs no gradient",
                "for dL/dx to arrive, the fresh input of the recomputation must be Tensor(x, requires_grad=True).",
                _RecomputesWithoutRecording),
        Mistake("keeping the output as well",
                "backward recomputes the output from x, so keeping it until backward (ctx.out = out, or out.data, "
                "or anywhere else: a list, the class, a global) is memory spent for nothing: a Tensor kept keeps its "
                "array alive. Keep x alone.",
                _KeepsTheOutput),
    ],
    hints=("Forward: run fn on x without recording anything (no_grad), keep on ctx only what backward needs to "
           "run it again, and return the result as a NumPy array (its .data).",
           "Backward: make a fresh Tensor from the saved input, one that requires a gradient; run fn on it again, "
           "recorded this time; send g back through that result; return one gradient per argument of forward "
           "(fn has none)."),
))
