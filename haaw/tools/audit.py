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
    params = [p for p in model.parameters() if p.requires_grad]
    saved_data = [p.data.copy() for p in params]
    saved_grads = [p.grad for p in params]
    frozen = [t for t in model.parameters() if not t.requires_grad]
    frozen_data = [t.data.copy() for t in frozen]
    items = []

    stale = sum(g is not None for g in saved_grads)
    items.append(Item("gradients zeroed", FAIL if stale else PASS,
                      f"{stale} parameter(s) still hold gradients from an earlier backward: call zero_grad() "
                      "before the step unless you are accumulating on purpose" if stale
                      else "no gradient left over from an earlier step"))
    try:
        for p in params:
            p.grad = None
        losses = token_losses(model, inputs, targets)
        loss = reduce(losses, mask)
        value = float(loss.item())

        garbage = Tensor((1 - mask) * 1e3)
        with_garbage = float(reduce(losses + garbage, mask).item())
        items.append(Item("mask before the reduction", PASS if _close(value, with_garbage) else FAIL,
                          "padded positions do not affect the loss" if _close(value, with_garbage) else
                          f"changing only the padded positions changes the loss ({value:.6g} -> {with_garbage:.6g}): "
                          "apply the mask before you reduce"))

        extra = Tensor(np.full((mask.shape[0], 3), 1e3))
        padded = float(reduce(cat([losses, extra], dim=1),
                              np.concatenate([mask, np.zeros((mask.shape[0], 3))], axis=1)).item())
        items.append(Item("independent of padding length", PASS if _close(value, padded) else FAIL,
                          "three more padded positions per row leave the loss unchanged" if _close(value, padded) else
                          f"three more padded positions per row change the loss ({value:.6g} -> {padded:.6g}): "
                          "divide by the number of real positions, not by the padded size"))

        raw = losses.data.astype(np.float64)
        per_token = float(np.sum(raw * mask) / np.sum(mask))
        per_example = float(np.mean(np.sum(raw * mask, axis=1) / np.maximum(np.sum(mask, axis=1), 1)))
        found = "token" if _close(value, per_token) else "example" if _close(value, per_example) else "neither"
        items.append(Item("loss unit", PASS if found == unit else FAIL,
                          f"the loss is the mean per {found}, as intended" if found == unit else
                          f"the loss is the mean per {found}, but per {unit} was intended" if found != "neither" else
                          f"the loss is neither the mean per token ({per_token:.6g}) nor per example "
                          f"({per_example:.6g}): it is {value:.6g}"))

        loss.backward()
        grads = [None if p.grad is None else p.grad.copy() for p in params]
        norm = float(np.sqrt(sum(np.sum(g.astype(np.float64) ** 2) for g in grads if g is not None)))
        healthy = np.isfinite(norm) and norm <= max_grad_norm
        items.append(Item("gradient norm", PASS if healthy else FAIL,
                          f"global norm {norm:.4g}" + ("" if healthy else f" is not finite or above {max_grad_norm:g}")))

        if frozen:
            touched = [t for t in frozen if t.grad is not None]
            if optimizer is not None:
                optimizer.step()
                touched += [t for t, before in zip(frozen, frozen_data) if not np.array_equal(t.data, before)]
                for p, data in zip(params, saved_data):  # undo the step before measuring anything else
                    p.data = data.copy()
            items.append(Item("frozen parameters untouched", FAIL if touched else PASS,
                              f"{len(touched)} frozen tensor(s) got a gradient or were updated" if touched else
                              f"{len(frozen)} frozen tensor(s): no gradient, no update"))

        for fn, example in custom_ops:
            report = gradcheck(fn, *example)
            name = getattr(getattr(fn, "__self__", None), "__name__", None) or getattr(fn, "__name__", "custom op")
            items.append(Item(f"gradcheck of {name}", PASS if report.ok else FAIL,
                              "backward matches finite differences" if report.ok else
                              f"backward disagrees with finite differences (max relative error "
                              f"{max(r.rel_error for r in report.rows):.2g})"))

        if accumulation > 1:
            scale = 1.0 if accumulation_scale is None else accumulation_scale
            for p in params:
                p.grad = None
            for rows in np.array_split(np.arange(len(inputs)), accumulation):
                part = reduce(token_losses(model, inputs[rows], targets[rows]), mask[rows]) * scale
                part.backward()
            ratios = [np.sum(p.grad * g) / np.sum(g * g) for p, g in zip(params, grads)
                      if g is not None and np.any(g != 0)]
            ratio = float(np.median(ratios))
            same = all(np.allclose(p.grad, g, rtol=1e-6, atol=1e-12) for p, g in zip(params, grads) if g is not None)
            if same:
                detail = "the accumulated gradient equals the one-batch gradient"
            elif abs(ratio - accumulation) < 0.05:
                detail = (f"the accumulated gradient is {ratio:.3g}× the one-batch gradient: scale each "
                          f"microbatch loss by 1/{accumulation}")
            else:
                detail = (f"the accumulated gradient differs from the one-batch gradient (about {ratio:.3g}× "
                          "overall, unevenly): the microbatches hold different numbers of real tokens, so "
                          "divide each one's summed loss by the real tokens of the whole batch")
            items.append(Item(f"accumulation over {accumulation} microbatches", PASS if same else FAIL, detail))
    finally:
        for p, data, grad in zip(params, saved_data, saved_grads):
            p.data, p.grad = data, grad
        for t, data in zip(frozen, frozen_data):
            t.data = data
    return AuditReport(items)
