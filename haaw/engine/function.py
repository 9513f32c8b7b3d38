"""Operations written outside the table: your own forward and backward, and checkpointing.

``Function`` is PyTorch's ``torch.autograd.Function`` in miniature. Subclass it, write
``forward(ctx, *args)`` on NumPy arrays (keep what backward needs on ``ctx``) and
``backward(ctx, g)``, returning one gradient per argument of ``forward`` (None for arguments that
are not Tensors), then call ``MyOp.apply(...)`` on Tensors. Nothing checks that your backward
matches your forward, which is exactly why custom operations are where wrong gradients hide:
``gradcheck`` every one of them.

``checkpoint`` is itself such an operation: its forward keeps only its inputs, and its backward
runs the forward again to rebuild what it did not keep.
"""
from __future__ import annotations

from . import guard, hooks
from .autograd import topological_order
from .ops import OPS, Op, no_flops
from contextlib import contextmanager

import pickle

import numpy as np

from .modes import enable_grad, no_grad
from .tensor import Tensor, apply, wrap

# Random sources a checkpoint's recomputation replays: (read the state, set it) pairs. NumPy's global generator is
# one; haaw.nn adds haaw's own (random_source), which the engine may not import.
RANDOM_SOURCES: list = [(np.random.get_state, np.random.set_state)]


def random_source(get, set_) -> None:
    """Register a generator whose state ``checkpoint`` saves at the forward pass and restores for the recompute."""
    RANDOM_SOURCES.append((get, set_))


def _states(kept: bytes | None):
    return None if kept is None else pickle.loads(kept)  # noqa: S301 (bytes this module wrote itself)


@contextmanager
def _replaying(states):
    """Run with the random states the forward pass saw (``states``, None: as they are), then put back the present
    ones: the recomputation draws the same numbers (dropout masks) and the draws after it do not move."""
    if states is None:
        yield
        return
    now = [get() for get, _ in RANDOM_SOURCES]
    for (_, set_), state in zip(RANDOM_SOURCES, states):
        set_(state)
    try:
        yield
    finally:
        for (_, set_), state in zip(RANDOM_SOURCES, now):
            set_(state)


class Function:
    """Subclass with ``forward(ctx, *args)`` and ``backward(ctx, g)``, both static; call ``apply``."""

    flops = staticmethod(lambda inputs, out, needs: (0, 0))  # custom work is not counted
    always_record = False  # True: record even when no input needs a gradient (forward holds parameters)

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("write forward(ctx, *args): it receives NumPy arrays and returns one")

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("write backward(ctx, g): it returns one gradient per argument of forward")

    @classmethod
    def apply(cls, *args, **params):
        where = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        name = cls.__name__

        def forward(ctx, *arrays, **params):
            full = list(args)
            for i, array in zip(where, arrays):
                full[i] = array
            with _all_arguments(ctx, where, len(args)):
                out = cls.forward(ctx, *full, **params)
            if isinstance(out, Tensor):
                raise TypeError(f"{name}.forward returned a Tensor: forward works on NumPy arrays, return one "
                                "(its inputs arrive as arrays, and what it returns is wrapped for you)")
            if out is None:
                raise TypeError(f"{name}.forward returned None: return its result, a NumPy array")
            return out

        def backward(ctx, g):
            with _all_arguments(ctx, where, len(args)):
                grads = cls.backward(ctx, g)
            grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
            if len(grads) != len(args):
                raise ValueError(f"{name}.backward returned {len(grads)} gradient(s) for the {len(args)} "
                                 "argument(s) of forward: return one per argument (None where there is none)")
            for i, g in enumerate(grads):  # as PyTorch: no gradient for an argument that is not a Tensor
                if i not in where and g is not None:
                    raise ValueError(f"{name}.backward returned a gradient for argument {i} of forward, which is not "
                                     f"a Tensor ({type(args[i]).__name__}): return None in that place (gradients go "
                                     "in the order of forward's arguments)")
            return [grads[i] for i in where]

        op = Op(name, forward, vjp_all=backward, flops=cls.flops, always_record=cls.always_record)
        return apply(op, *(args[i] for i in where), **params)


class _all_arguments:
    """While the user's code runs, ``ctx.needs_input_grad`` has one entry per argument, as in PyTorch."""

    def __init__(self, ctx, where, count):
        self.ctx, self.where, self.count = ctx, where, count

    def __enter__(self):
        self.engine_needs = self.ctx.needs_input_grad
        full = [False] * self.count
        for i, need in zip(self.where, self.engine_needs):
            full[i] = need
        self.ctx.needs_input_grad = tuple(full)

    def __exit__(self, *exc):
        self.ctx.needs_input_grad = self.engine_needs


guard.REFUSABLE["function.Checkpoint"] = "the engine's Checkpoint (checkpoint(), or a subclass of Checkpoint)"


class Checkpoint(Function):
    """Forget what ``fn`` computes inside; keep its inputs; recompute it when backward arrives."""

    flops = staticmethod(no_flops)
    always_record = True  # fn may hold parameters that need gradients even if its inputs do not

    @staticmethod
    def forward(ctx, fn, *inputs, tensors=None, preserve_rng_state=True, save=()):
        guard.check("function.Checkpoint")
        for name in save:
            if name not in OPS or OPS[name].keep is None:
                known = sorted(n for n, op in OPS.items() if op.keep is not None)
                raise ValueError(f"checkpoint(save=...): {name!r} cannot be kept; the operations whose results "
                                 f"selective checkpointing can keep are {known}")
        tensors = tensors or (True,) * len(inputs)  # which inputs were Tensors: the others are passed as they are
        # the generators' states, kept as bytes (2.5 KB for NumPy's): bookkeeping, not an array backward computes
        # with, so the memory tracker, which counts those, leaves it out, as PyTorch's memory of activations does
        ctx.rng = pickle.dumps([get() for get, _ in RANDOM_SOURCES]) if preserve_rng_state else None
        kept = []  # selective: the results of the operations named in save, kept for the recomputation
        outside = ctx.outside = _Outside()

        def note(op, op_ctx, used, result):  # nothing made inside requires grad (no_grad): what does came from outside
            for t in used:
                if t.requires_grad and t._parents and all(t is not u for u in outside.tensors):
                    outside.tensors.append(t)

        with no_grad(), hooks.selecting(save, kept, "keep"), hooks.registered("forward", note):
            out = fn(*(wrap(a) if t else a for a, t in zip(inputs, tensors) if t is not None))
        ctx.save, ctx.kept = tuple(save), kept
        if not isinstance(out, Tensor):
            raise TypeError(f"checkpoint: fn must return a Tensor, got {type(out).__name__}")
        ctx.fn, ctx.inputs, ctx.tensors = fn, inputs, tensors  # the inputs are all that is kept
        return out.data

    @staticmethod
    def backward(ctx, g):
        guard.check("function.Checkpoint")
        tensors = ctx.tensors  # forward sets every field of ctx read here before a backward can run
        fresh = [wrap(a) if t else a for a, t in zip(ctx.inputs, tensors)]  # the anchor (None) stays an array
        for t, need in zip(fresh, ctx.needs_input_grad[1:]):
            if isinstance(t, Tensor):
                t.requires_grad = need
        # recorded even when backward was called inside no_grad(), as PyTorch's recomputation is
        kept = list(ctx.kept)
        with hooks.recompute(), enable_grad(), _replaying(_states(ctx.rng)), hooks.selecting(ctx.save, kept, "reuse"):
            # this time recorded; the kept results reused, not computed again
            again = ctx.fn(*(a for a, t in zip(fresh, tensors) if t is not None))
        outside = ctx.outside
        cut = outside.tensors
        outside.grads = [None] * len(cut)  # what Checkpoint.apply's backward sends them if fn's result needs none
        if again.requires_grad:
            # the intermediates of the enclosing graph that fn uses are parents of this node (Checkpoint.apply): this
            # pass stops at them, as at leaves, and hands their shares to the enclosing pass, which adds them to
            # the rest and runs their hooks once on the sum, as PyTorch's one pass does
            was = [(t, t._parents, t.grad, t._hooks) for t in cut]
            try:
                for t in cut:
                    t._parents, t.grad, t._hooks = (), None, ()
                # an intermediate of the enclosing graph this pass reaches all the same (fn, run again, used one the
                # forward pass did not see) holds the enclosing pass's running sum, which this pass would reset
                kept = [(node, node.grad) for node in topological_order(again) if node._parents]
                again.backward(g)  # parameters inside fn, and leaves fn captured, receive their gradients here
                for node, grad in kept:
                    node.grad = grad
                outside.grads = [t.grad for t in cut]  # Checkpoint.apply's backward sends them on
            finally:
                for t, parents, grad, handles in was:
                    t._parents, t.grad, t._hooks = parents, grad, handles
        return (None, *(t.grad if isinstance(t, Tensor) else None for t in fresh))

    @classmethod
    def apply(cls, fn, *inputs, **params):
        """``Function.apply``, then the intermediates of the enclosing graph that fn used (found as it ran) become
        parents of the result too, as they are of PyTorch's: the enclosing pass then reaches them through it."""
        out = super().apply(fn, *inputs, **params)
        ctx = out._ctx
        if ctx is None or not ctx.outside.tensors:  # not recorded (no_grad), or fn used nothing from outside
            return out
        out._parents = (*out._parents, *ctx.outside.tensors)
        ctx.needs_input_grad = (*ctx.needs_input_grad, *(True,) * len(ctx.outside.tensors))
        per_argument = ctx.op.vjp_all  # an Op of this call's own (Function.apply makes one per call)
        ctx.op.vjp_all = lambda c, g: [*per_argument(c, g), *c.outside.grads]  # backward puts them there
        return out


class _Outside:
    """The intermediates of the enclosing graph that a checkpoint's fn used. Not saved by the checkpoint (the
    enclosing graph holds them): kept in slots, where the memory tracker, which reads what ctx holds, does not look."""

    __slots__ = ("tensors", "grads")

    def __init__(self):
        self.tensors, self.grads = [], []


def checkpoint(fn, *inputs, preserve_rng_state: bool = True, use_reentrant: bool | None = None,
               save=()) -> Tensor:
    """``fn(*inputs)``, with its activations recomputed during backward instead of stored.

    ``fn`` may use tensors from outside (a weight, or an intermediate of the enclosing graph): their gradients
    are right, each path counted once, as in PyTorch. Such an intermediate becomes a parent of the result, as in
    PyTorch's graph, so its hooks run once, on the sum of fn's share and the rest. Inputs that are not
    Tensors (a dim, a flag, a float) reach ``fn`` as they are. The recomputation sees the random state the forward
    pass saw (NumPy's global generator and haaw's), unless ``preserve_rng_state=False``, as in PyTorch.
    ``use_reentrant`` is accepted for PyTorch's spelling; haaw's checkpoint is PyTorch's non-reentrant one.

    ``save`` makes it *selective*: the results of the operations it names (``"matmul"``, ``"linear"``) are kept from
    the forward pass and reused, not recomputed; everything else inside is recomputed. PyTorch writes this as
    ``context_fn=partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default, ...])``.
    """
    if use_reentrant:
        raise NotImplementedError("checkpoint(use_reentrant=True): haaw's checkpoint is PyTorch's non-reentrant "
                                  "one; pass use_reentrant=False, or leave it out")
    tensors = tuple(isinstance(t, Tensor) for t in inputs)
    if not any(tensors):  # fn uses only tensors from outside: an anchor gives the result a parent, so that
        inputs, tensors = (Tensor(0.0), *inputs), (None, *tensors)  # backward reaches it (fn is not passed it)
    return Checkpoint.apply(fn, *inputs, tensors=tensors, preserve_rng_state=preserve_rng_state, save=tuple(save))
