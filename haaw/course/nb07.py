"""Data, a trained starting point and a run's bookkeeping for the precision notebook (plumbing: the experiments
are in the notebook).

A small classifier: 128 examples with 16 features and 8 classes (each label is the largest of 8 random linear
scores, so the classes can be separated), and an MLP 16 → 32 → 32 → 8 with tanh between the layers.
``pretrained_weights`` trains it in fp32 with plain SGD, so that notebook 07 can start where mixed precision
gets hard: late in training, when the model is confident and its gradients are small. ``RunLog`` counts what a
mixed-precision run loses, so that the loop the core notebook shows holds only the loop; ``train`` is that loop
again, with the knobs the companion notebook turns (the learner's ``unscale_and_clip``, the tokens, the rate, and
how 16-bit weights without an fp32 master are rounded: to nearest, stochastically, or with a compensation).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..amp import StaticLossScaler, dtype
from ..engine import Tensor
from ..nn import MLP
from ..nn import functional as F
from ..nn.utils import clip_grad_norm_
from ..optim import SGD, Adam

N, D, C, HIDDEN = 128, 16, 8, 32
TOKENS = 2**17  # the tokens of a batch of 64 sequences × 2048, which each example stands for
SIZES = (D, HIDDEN, HIDDEN, C)


def classification_data(n: int = N, features: int = D, classes: int = C, seed: int = 0):
    """(x, labels): standard-normal inputs, each labelled with the largest of ``classes`` random linear scores."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features))
    labels = np.argmax(x @ rng.standard_normal((features, classes)), axis=1)
    return x, labels


def classifier(weights=None, dtype=np.float32) -> MLP:
    """The notebook's MLP (tanh), holding ``weights`` (fp32 arrays) rounded to ``dtype``; its own start if None."""
    model = MLP(list(SIZES), "tanh", seed=1, dtype=np.float32)
    for p, w in zip(model.parameters(), weights if weights is not None else [p.data for p in model.parameters()]):
        p.data = np.asarray(w, dtype=np.float32).astype(dtype)
    return model


@lru_cache(maxsize=2)
def pretrained_weights(steps: int = 300, lr: float = 1.0) -> tuple:
    """The classifier's weights (fp32 arrays) after ``steps`` steps of full-batch SGD in fp32."""
    x, labels = classification_data()
    model = classifier()
    optimizer = SGD(model.parameters(), lr=lr)
    inputs = Tensor(x.astype(np.float32))
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), labels).backward()
        optimizer.step()
    weights = tuple(p.data.copy() for p in model.parameters())
    for w in weights:
        w.setflags(write=False)  # shared by every caller (cached): nobody may change them in place
    return weights


class RunLog:
    """What a mixed-precision run lost, counted as it runs. The loop calls ``step`` once the gradients are
    unscaled and checked (before the scaler's update, so the scale noted is the one this step used) and
    ``updated`` right after the optimizer's step (before the 16-bit copy is rounded and, without master
    weights, stored back), and returns ``result()``.

    It counts the gradient entries that were exactly 0, how many of those weights the optimizer moved all the
    same (on momentum), and the updates the optimizer made in fp32 that the weights kept afterwards do not hold.
    """

    def __init__(self, master):
        self.master = list(master)
        self.losses, self.scales, self.skipped_steps = [], [], []
        self.zeros = self.entries = self.moved = self.lost = self.coasted = 0
        self.scaler = self._before = self._grads = self._intended = None

    def step(self, loss: float, scaler, found_inf: bool, grads) -> None:
        """One step's loss (a float), the scaler it used, whether it overflowed, its unscaled fp32 gradients."""
        self._settle()
        self.scaler = scaler
        self.losses.append(float(loss))
        self.scales.append(scaler.scale)
        if found_inf:
            self.skipped_steps.append(len(self.losses) - 1)
            return
        self.zeros += sum(int(np.sum(g == 0)) for g in grads)
        self.entries += sum(g.size for g in grads)
        self._grads = [np.asarray(g) for g in grads]
        self._before = [w.data.copy() for w in self.master]

    def updated(self) -> None:
        """Right after the optimizer's step: where it moved a weight, in fp32."""
        self._intended = [w.data != old for w, old in zip(self.master, self._before)]

    def _settle(self) -> None:
        """The last step's lost updates: moved by the optimizer, but not in what was kept."""
        if self._intended is None:
            return
        for w, old, moved, g in zip(self.master, self._before, self._intended, self._grads):
            self.moved += int(np.sum(moved))
            self.coasted += int(np.sum(moved & (g == 0)))
            self.lost += int(np.sum(moved & (w.data == old)))
        self._intended = None

    def result(self) -> dict:
        """The losses, the scales and the skipped steps; the shares of zero gradient entries, of zero entries
        moved all the same, and of updates lost; the scale at the end."""
        self._settle()
        return {"losses": self.losses, "skipped": len(self.skipped_steps), "skipped_steps": self.skipped_steps,
                "scales": self.scales, "scale": self.scaler.scale if self.scaler else None,
                "zero": self.zeros / max(self.entries, 1), "lost": self.lost / max(self.moved, 1),
                "zero moved": self.coasted / max(self.zeros, 1)}


def round_stochastic(x, u):
    """Each entry of ``x`` (fp32) rounded to one of its two bf16 neighbours: to the one above it when ``u`` (uniform
    in [0, 1), one per entry) is below ``(x - below) / (above - below)``, else to the one below. On average over
    ``u`` that is ``x`` itself, however small the distance to ``below``: nothing is rounded away for good."""
    bf16 = dtype("bfloat16")
    x = np.asarray(x, dtype=np.float32)
    nearest = x.astype(bf16)
    below = np.where(nearest.astype(np.float32) <= x, nearest, np.nextafter(nearest, bf16.type(-np.inf)))
    above = np.where(nearest.astype(np.float32) >= x, nearest, np.nextafter(nearest, bf16.type(np.inf)))
    low, high = below.astype(np.float64), above.astype(np.float64)
    gap = np.where(high > low, high - low, 1.0)            # x a bf16 number already: below = above, any gap will do
    return np.where(u < (x - low) / gap, above, below)


ROUNDINGS = ("nearest", "stochastic", "compensated")


def train(fmt: str, scaler=None, keep_master: bool = True, clip=None, steps: int = 200, lr: float = 1e-4,
          max_norm: float = 1.0, tokens: int = TOKENS, weights=None, rounding="nearest", seed: int = 0) -> dict:
    """Notebook 07's mixed-precision loop: continue training the classifier from ``weights`` (the pretrained
    ones if None) for ``steps`` steps of Adam in format ``fmt``, and return what ``RunLog`` counted.

    ``clip`` is a function ``(grads, scale, max_norm) -> (grads, norm, found_inf)`` that unscales, checks and
    clips (exercise 07-unscale-then-clip); without it the scaler unscales and checks, and
    ``clip_grad_norm_`` clips. The loss is the sum of the examples' losses divided by ``tokens``; the losses
    logged are per example.

    Without master weights (``keep_master=False``, bf16 only for the last two), ``rounding`` says how the updated
    weights are stored in 16 bits: ``"nearest"``; ``"stochastic"`` (``round_stochastic``, its random numbers from
    ``seed``) or a function ``(x, u) -> bf16`` that does the same (exercise 07-stochastic-rounding);
    ``"compensated"``: a second 16-bit number per weight keeps what rounding dropped, and is added to the next
    update (Kahan's compensated summation). The result also holds the weights kept at the end.
    """
    if callable(rounding) or rounding == "stochastic":
        if keep_master or fmt != "bfloat16":
            raise ValueError("stochastic rounding here is to bf16, of weights kept without a master: "
                             "train('bfloat16', keep_master=False, rounding=...)")
        to_bf16 = rounding if callable(rounding) else round_stochastic
    elif rounding not in ROUNDINGS:
        raise ValueError(f"rounding is one of {ROUNDINGS} or a function (x, u) -> bf16, not {rounding!r}")
    elif rounding == "compensated" and keep_master:
        raise ValueError("compensated summation replaces the master weights: use it with keep_master=False")
    rng = np.random.default_rng(seed)
    x, labels = classification_data()
    weights = pretrained_weights() if weights is None else weights
    low = dtype(fmt)
    model = classifier(weights, dtype=low)                # the 16-bit copy: forward and backward run in it
    master = [Tensor(np.array(w, dtype=np.float32)) for w in weights]   # the fp32 master weights
    optimizer = Adam(master, lr=lr)
    scaler = scaler or StaticLossScaler(1.0)              # a scale of 1: no loss scaling
    log = RunLog(master)
    inputs = Tensor(x.astype(low))
    carry = [np.zeros(w.shape, dtype=low) for w in master]  # compensated: what rounding dropped, in 16 bits
    for _ in range(steps):
        model.zero_grad()
        logits = model(inputs).to(np.float32)                                 # forward in 16 bits
        loss = F.cross_entropy(logits, labels, reduction="sum") / tokens      # the loss in fp32
        (loss * scaler.scale).backward()                                      # backward in 16 bits
        raw = [p.grad.astype(np.float32) for p in model.parameters()]
        if clip is None:
            grads, found_inf = scaler.unscale(raw)
        else:
            grads, _, found_inf = clip(raw, scaler.scale, max_norm)
        log.step(loss.item() * tokens / len(labels), scaler, found_inf, grads)
        scaler.update(found_inf)
        if found_inf:
            continue                                                          # skip: the weights stay
        for w, g in zip(master, grads):
            w.grad = g
        if clip is None:
            clip_grad_norm_(master, max_norm)                                 # after unscaling
        before = [w.data.copy() for w in master]
        optimizer.step()                                                      # Adam, on the fp32 masters
        log.updated()
        for p, w, old, c in zip(model.parameters(), master, before, carry):
            if keep_master or rounding == "nearest":
                p.data = w.data.astype(low)                                   # the 16-bit copy, rounded afresh
            elif rounding == "compensated":
                wanted = old + ((w.data - old) + c.astype(np.float32))        # this update plus what was dropped
                p.data = wanted.astype(low)
                c[...] = (wanted - p.data.astype(np.float32)).astype(low)     # dropped now: carried to the next
            else:
                p.data = np.asarray(to_bf16(w.data.copy(), rng.random(w.shape)))
            if not keep_master:
                w.data[...] = p.data                                          # no master: only 16 bits kept
    result = log.result()
    result["weights"] = [w.data.copy() for w in master]
    return result
