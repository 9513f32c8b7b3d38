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

from .engine import plugins
from .engine.guard import refusable
from .engine.dtypes import as_dtype

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
