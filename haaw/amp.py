"""Mixed precision from scratch: number formats, loss scaling, fp32 master weights.

Forward and backward run in a 16-bit format (half the memory, and on accelerators much faster);
the weights that the optimizer updates stay in fp32 (the *master* copy), because a small update
added to a 16-bit weight is rounded away. fp16's range is narrow: gradients below about 6e-8
become exactly 0. Multiplying the loss by a scale S multiplies every gradient by S (the chain
rule is linear in the upstream gradient), lifting them into range; the optimizer divides by S
again before using them. A dynamic scaler finds S by itself: it grows S after a run of clean
steps, and when a gradient overflows to inf it halves S and skips that step.
"""
from __future__ import annotations

import numpy as np

import functools
from contextlib import ContextDecorator

from .engine import modes, plugins
from .engine.guard import refusable
from .engine.dtypes import as_dtype, is_float

FORMATS = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def dtype(name: str):
    """The NumPy dtype of a format name; bfloat16 and the float8s come from ml_dtypes (engine/dtypes.py)."""
    return as_dtype(name, "dtype()")


def format_table() -> list[dict]:
    """Range and precision of each format: largest, smallest normal, smallest subnormal, epsilon."""
    import ml_dtypes

    rows = []
    for name in FORMATS:
        info = ml_dtypes.finfo(dtype(name))
        rows.append({"format": name, "bits": dtype(name).itemsize * 8, "max": float(info.max),
                     "smallest normal": float(info.smallest_normal),
                     "smallest subnormal": float(info.smallest_subnormal), "epsilon": float(info.eps)})
    return rows


def cast_report(values: np.ndarray, name: str, scale: float = 1.0) -> dict:
    """What happens to nonzero ``values`` (times ``scale``) stored in format ``name``."""
    values = np.asarray(values, dtype=np.float64)
    values = values[values != 0]
    with np.errstate(over="ignore"):
        stored = (values * scale).astype(dtype(name))
    back = stored.astype(np.float64)
    return {"zero": float(np.mean(back == 0)), "inf": float(np.mean(~np.isfinite(back))),
            "kept": float(np.mean((back != 0) & np.isfinite(back)))}


class StaticLossScaler:
    """Multiply the loss by a fixed ``scale``; divide the gradients by it before the update."""

    def __init__(self, scale: float = 1024.0):
        self.scale = float(scale)

    def scale_loss(self, loss):
        """The loss times the scale, computed in fp32 (PyTorch's ``scaler.scale(loss)``): a 16-bit loss times
        2¹⁶ would overflow fp16, whose largest number is 65504."""
        return loss.to(np.float32) * self.scale

    @refusable("amp.unscale", "the engine's loss scaler's unscale")
    def unscale(self, grads: list) -> tuple[list, bool]:
        """(fp32 gradients divided by the scale, whether any of them is inf or nan).

        A gradient that is None (a frozen parameter, or one the loss does not reach) stays None and is
        not checked, as PyTorch's GradScaler skips it."""
        out = [None if g is None else np.asarray(g, dtype=np.float32) / np.float32(self.scale) for g in grads]
        return out, not all(np.all(np.isfinite(g)) for g in out if g is not None)

    def update(self, found_inf: bool) -> None:
        """A static scaler never changes."""


class DynamicLossScaler(StaticLossScaler):
    """Grow the scale after ``growth_interval`` clean steps; on inf/nan halve it and skip the step.

    The defaults are those of ``torch.amp.GradScaler``, and so is the sequence of scales.
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000):
        super().__init__(init_scale)
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self.clean_steps = 0

    @refusable("amp.DynamicLossScaler.update", "the engine's DynamicLossScaler.update")
    def update(self, found_inf: bool) -> None:
        yours = plugins.override("loss_scale")
        if yours:  # notebook 07: your update_scale in place of the lines below
            self.scale, self.clean_steps = yours(self.scale, self.clean_steps, bool(found_inf), self.growth_factor,
                                                 self.backoff_factor, self.growth_interval)
            return
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                self.scale *= self.growth_factor
                self.clean_steps = 0


class MasterWeights:
    """fp32 master copies of a model's low-precision parameters, and the update applied to them."""

    def __init__(self, params: list, low: str = "float16"):
        self.params = list(params)
        self.low = dtype(low)
        self.master = [p.data.astype(np.float32) for p in self.params]
        self.copy_to_model()

    def copy_to_model(self) -> None:
        """Round the fp32 masters into the model's 16-bit parameters (for the next forward)."""
        for p, m in zip(self.params, self.master):
            p.data = m.astype(self.low)

    def step(self, scaler, lr: float) -> bool:
        """Unscale, check, update the masters in fp32, refresh the model. Returns False if skipped."""
        grads, found_inf = scaler.unscale([p.grad for p in self.params])
        scaler.update(found_inf)
        if found_inf:
            return False  # an overflow: this step's gradients are garbage; leave the weights alone
        for m, g in zip(self.master, grads):
            if g is not None:  # a parameter without a gradient is left as it is
                m -= np.float32(lr) * g
        self.copy_to_model()
        return True


plugins.slot("loss_scale", "update_scale(scale, good_steps, found_inf, growth_factor, backoff_factor, "
                           "growth_interval) -> (new scale, new good_steps)",
             refuses=("amp.DynamicLossScaler.update", "torch.amp.GradScaler"))


# --- autocast, and custom Functions under it ------------------------------------------------------
def _cpu(device_type, where: str) -> None:
    """Refuse a ``device_type`` other than "cpu": PyTorch refuses a name that is not a device, and haaw has one."""
    if device_type != "cpu":
        raise ValueError(f"{where}: device_type {device_type!r} is not haaw's device; haaw computes on the CPU only, "
                         "so write device_type='cpu'")


class autocast(ContextDecorator):
    """Inside the block, matrix products (``@``, ``matmul``, ``F.linear``) cast their float inputs to ``dtype`` and
    run in it; every other operation runs in its inputs' format. The casts are recorded, so gradients flow back to
    the fp32 weights in fp32. ``with amp.autocast("cpu", dtype="bfloat16"):`` as PyTorch's ``torch.autocast``;
    ``device_type`` is accepted for its spelling (haaw has one device), ``enabled=False`` turns autocast off."""

    def __init__(self, device_type: str = "cpu", dtype="bfloat16", enabled: bool = True):
        _cpu(device_type, "autocast")
        self.dtype = as_dtype(dtype, "autocast") if enabled else None
        self._blocks = []  # a stack: the same object may be entered again by a recursive call

    def __enter__(self):
        block = modes.autocast_as(self.dtype)
        block.__enter__()
        self._blocks.append(block)
        return self

    def __exit__(self, *exc):
        return self._blocks.pop().__exit__(*exc)


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    _cpu(device_type, "is_autocast_enabled")
    return modes.autocast_dtype() is not None


def get_autocast_dtype(device_type: str = "cpu"):
    """The format autocast would cast to: its dtype while it is on, bfloat16 (haaw's CPU default) while it is off."""
    _cpu(device_type, "get_autocast_dtype")
    return modes.autocast_dtype() or as_dtype("bfloat16")


def custom_fwd(fwd=None, *, device_type: str = "cpu", cast_inputs=None):
    """Decorate a custom Function's ``forward``: it notes on ``ctx`` whether autocast was on, and in which format, so
    that ``custom_bwd`` can run the backward the same way. With ``cast_inputs`` (a dtype), under autocast, the
    forward's float arrays are cast to it and the forward runs with autocast off (an operation that needs fp32);
    outside autocast it changes nothing. As ``torch.amp.custom_fwd``."""
    _cpu(device_type, "custom_fwd")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def forward(ctx, *args, **kwargs):
        state = modes.autocast_dtype()
        ctx.input_dtypes = tuple(a.dtype if hasattr(a, "dtype") else None for a in args)
        if cast_inputs is None or state is None:
            ctx.autocast_state = state
            return fwd(ctx, *args, **kwargs)
        ctx.autocast_state = None  # the forward ran with autocast off: so will the backward
        low = as_dtype(cast_inputs, "custom_fwd(cast_inputs=...)")
        cast = [a.astype(low) if isinstance(a, np.ndarray) and is_float(a.dtype) else a for a in args]
        with modes.autocast_as(None):
            return fwd(ctx, *cast, **kwargs)

    return forward


def custom_bwd(bwd=None, *, device_type: str = "cpu"):
    """Decorate a custom Function's ``backward`` (its ``forward`` decorated with ``custom_fwd``): the backward runs
    in the autocast state its forward ran in, whatever the state where ``.backward()`` was called, and each
    gradient comes back in the format of its forward argument (PyTorch's engine does that last part for every
    Function). As ``torch.amp.custom_bwd``."""
    _cpu(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def backward(ctx, *grads):
        if not hasattr(ctx, "autocast_state"):
            raise TypeError("custom_bwd: decorate the Function's forward with custom_fwd too (it notes the autocast "
                            "state the backward should run in)")
        with modes.autocast_as(ctx.autocast_state):
            out = bwd(ctx, *grads)
        single = not isinstance(out, (tuple, list))
        out = [out] if single else list(out)
        for i, (g, kind) in enumerate(zip(out, ctx.input_dtypes)):
            if isinstance(g, np.ndarray) and kind is not None and g.dtype != kind:
                out[i] = g.astype(kind)
        return out[0] if single else tuple(out)

    return backward
