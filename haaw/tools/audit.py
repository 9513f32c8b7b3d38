"""An automatic audit of one training step: the source text's checklist, item by item.

You describe the step in two pieces: ``token_losses(model, inputs, targets)`` returns the
unreduced loss of every position (batch × sequence), and ``reduce(losses, mask)`` turns those into
the scalar you call backward on. The audit then runs the step in ways that expose each classic bug
(garbage in the padded positions, extra padding, microbatches, a hand-written backward) and reports
what it saw. It restores the model's weights and gradients afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .gradcheck import gradcheck
from ..engine import Tensor, cat

PASS, FAIL, INFO = "✓", "✗", "·"


@dataclass
class Item:
    check: str
    status: str
    detail: str

    def __str__(self) -> str:
        return f"{self.status} {self.check}: {self.detail}"


@dataclass
class AuditReport:
    items: list

    @property
    def failed(self) -> list[str]:
        return [i.check for i in self.items if i.status == FAIL]

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        verdict = "all checks pass" if self.ok else f"{len(self.failed)} check(s) fail: {', '.join(self.failed)}"
        return "\n".join([f"audit: {verdict}"] + [f"  {item}" for item in self.items])

    __repr__ = __str__


def _close(a: float, b: float) -> bool:
    """Equal to a relative 1e-6, the tolerance of the course's code exercises: a function that passed its check
    is not then failed by the audit for its rounding."""
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1.0)


@dataclass
class _Step:
    """One training step under audit: what it was given, the model's state to restore, and what it computed."""

    model: object
    token_losses: object
    reduce: object
    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray
    optimizer: object
    unit: str
    accumulation: int
    accumulation_scale: float | None
    custom_ops: tuple
    max_grad_norm: float

    def __post_init__(self):
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.saved_data = [p.data.copy() for p in self.params]
        self.saved_grads = [p.grad for p in self.params]
        self.frozen = [t for t in self.model.parameters() if not t.requires_grad]
        self.frozen_data = [t.data.copy() for t in self.frozen]

    def forward(self) -> None:
        """From cleared gradients: every position's loss, the reduced loss and its value."""
        for p in self.params:
            p.grad = None
        self.losses = self.token_losses(self.model, self.inputs, self.targets)
        self.loss = self.reduce(self.losses, self.mask)
        self.value = float(self.loss.item())

    def backward(self) -> None:
        """Backward from the loss; keep a copy of each parameter's gradient."""
        self.loss.backward()
        self.grads = [None if p.grad is None else p.grad.copy() for p in self.params]

    def restore(self) -> None:
        """Put back every weight and gradient as they were before the audit."""
        for p, data, grad in zip(self.params, self.saved_data, self.saved_grads):
            p.data, p.grad = data, grad
        for t, data in zip(self.frozen, self.frozen_data):
            t.data = data


# --- the checks, in the order they run and report; each yields its items ------------------------------
def _gradients_zeroed(step):
    """No parameter holds a gradient from an earlier backward when the step begins."""
    stale = sum(g is not None for g in step.saved_grads)
    yield Item("gradients zeroed", FAIL if stale else PASS,
               f"{stale} parameter(s) still hold gradients from an earlier backward: call zero_grad() "
               "before the step unless you are accumulating on purpose" if stale
               else "no gradient left over from an earlier step")


def _mask_before_the_reduction(step):
    """Garbage in the padded positions leaves the loss unchanged."""
    value = step.value
    with_garbage = float(step.reduce(step.losses + Tensor((1 - step.mask) * 1e3), step.mask).item())
    yield Item("mask before the reduction", PASS if _close(value, with_garbage) else FAIL,
               "padded positions do not affect the loss" if _close(value, with_garbage) else
               f"changing only the padded positions changes the loss ({value:.6g} -> {with_garbage:.6g}): "
               "apply the mask before you reduce")


def _independent_of_padding_length(step):
    """Three more padded positions per row leave the loss unchanged."""
    value, mask = step.value, step.mask
    extra = Tensor(np.full((mask.shape[0], 3), 1e3))
    padded = float(step.reduce(cat([step.losses, extra], dim=1),
                               np.concatenate([mask, np.zeros((mask.shape[0], 3))], axis=1)).item())
    yield Item("independent of padding length", PASS if _close(value, padded) else FAIL,
               "three more padded positions per row leave the loss unchanged" if _close(value, padded) else
               f"three more padded positions per row change the loss ({value:.6g} -> {padded:.6g}): "
               "divide by the number of real positions, not by the padded size")


def _loss_unit(step):
    """The loss is the mean per token or per example, whichever ``unit`` names."""
    value, mask, unit = step.value, step.mask, step.unit
    raw = step.losses.data.astype(np.float64)
    per_token = float(np.sum(raw * mask) / np.sum(mask))
    per_example = float(np.mean(np.sum(raw * mask, axis=1) / np.maximum(np.sum(mask, axis=1), 1)))
    found = "token" if _close(value, per_token) else "example" if _close(value, per_example) else "neither"
    yield Item("loss unit", PASS if found == unit else FAIL,
               f"the loss is the mean per {found}, as intended" if found == unit else
               f"the loss is the mean per {found}, but per {unit} was intended" if found != "neither" else
               f"the loss is neither the mean per token ({per_token:.6g}) nor per example "
               f"({per_example:.6g}): it is {value:.6g}")


def _gradient_norm(step):
    """The global gradient norm is finite and at most ``max_grad_norm``."""
    norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in step.grads if g is not None)))
    healthy = np.isfinite(norm) and norm <= step.max_grad_norm
    yield Item("gradient norm", PASS if healthy else FAIL,
               f"global norm {norm:.4g}" + ("" if healthy else f" is not finite or above {step.max_grad_norm:g}"))


def _frozen_parameters_untouched(step):
    """Frozen tensors get no gradient, and the optimizer (if given) does not move them."""
    if not step.frozen:
        return
    touched = [t for t in step.frozen if t.grad is not None]
    if step.optimizer is not None:
        step.optimizer.step()
        touched += [t for t, before in zip(step.frozen, step.frozen_data) if not np.array_equal(t.data, before)]
        for p, data in zip(step.params, step.saved_data):  # undo the step before measuring anything else
            p.data = data.copy()
    yield Item("frozen parameters untouched", FAIL if touched else PASS,
               f"{len(touched)} frozen tensor(s) got a gradient or were updated" if touched else
               f"{len(step.frozen)} frozen tensor(s): no gradient, no update")


def _custom_ops_gradchecked(step):
    """Each custom operation's backward matches finite differences."""
    for fn, example in step.custom_ops:
        report = gradcheck(fn, *example)
        name = getattr(getattr(fn, "__self__", None), "__name__", None) or getattr(fn, "__name__", "custom op")
        yield Item(f"gradcheck of {name}", PASS if report.ok else FAIL,
                   "backward matches finite differences" if report.ok else
                   f"backward disagrees with finite differences (max relative error "
                   f"{max(r.rel_error for r in report.rows):.2g})")


def _accumulation(step):
    """The gradient summed over ``accumulation`` microbatches equals the one-batch gradient."""
    accumulation = step.accumulation
    if accumulation <= 1:
        return
    scale = 1.0 if step.accumulation_scale is None else step.accumulation_scale
    for p in step.params:
        p.grad = None
    for rows in np.array_split(np.arange(len(step.inputs)), accumulation):
        losses = step.token_losses(step.model, step.inputs[rows], step.targets[rows])
        (step.reduce(losses, step.mask[rows]) * scale).backward()
    ratios = [np.sum(p.grad * g) / np.sum(g * g) for p, g in zip(step.params, step.grads)
              if g is not None and np.any(g != 0)]
    ratio = float(np.median(ratios))
    same = all(np.allclose(p.grad, g, rtol=1e-6, atol=1e-12) for p, g in zip(step.params, step.grads) if g is not None)
    if same:
        detail = "the accumulated gradient equals the one-batch gradient"
    elif abs(ratio - accumulation) < 0.05:
        detail = (f"the accumulated gradient is {ratio:.3g}× the one-batch gradient: scale each "
                  f"microbatch loss by 1/{accumulation}")
    else:
        detail = (f"the accumulated gradient differs from the one-batch gradient (about {ratio:.3g}× "
                  "overall, unevenly): the microbatches hold different numbers of real tokens, so "
                  "divide each one's summed loss by the real tokens of the whole batch")
    yield Item(f"accumulation over {accumulation} microbatches", PASS if same else FAIL, detail)


# the checklist: before the forward pass, on the loss it gives, then on the gradients backward gives
BEFORE_FORWARD = (_gradients_zeroed,)
ON_THE_LOSS = (_mask_before_the_reduction, _independent_of_padding_length, _loss_unit)
ON_THE_GRADIENTS = (_gradient_norm, _frozen_parameters_untouched, _custom_ops_gradchecked, _accumulation)


def audit(model, token_losses, reduce, batch, *, optimizer=None, unit: str = "token", accumulation: int = 1,
          accumulation_scale: float | None = None, custom_ops=(), max_grad_norm: float = 1e3) -> AuditReport:
    """Run the checklist on one training step.

    ``batch`` is ``(inputs, targets, mask)`` with the batch on axis 0 and positions on axis 1;
    ``mask`` is 1 for real positions, 0 for padding. ``unit`` is what the loss should average over,
    "token" or "example". With ``accumulation`` = k, the step is also run as k microbatches whose
    losses are each multiplied by ``accumulation_scale`` (what your loop does; default 1), and the
    summed gradient is compared with the one-batch gradient. ``custom_ops`` lists
    ``(function, example_inputs)`` pairs to grad-check.
    """
    inputs, targets, mask = (np.asarray(a) for a in batch)
    step = _Step(model, token_losses, reduce, inputs, targets, mask, optimizer, unit, accumulation,
                 accumulation_scale, custom_ops, max_grad_norm)
    items = [item for check in BEFORE_FORWARD for item in check(step)]
    try:
        step.forward()
        items += [item for check in ON_THE_LOSS for item in check(step)]
        step.backward()
        items += [item for check in ON_THE_GRADIENTS for item in check(step)]
    finally:
        step.restore()
    return AuditReport(items)
