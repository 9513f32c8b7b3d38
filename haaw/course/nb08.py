"""A tiny padded sequence task for the bug gallery: sequences of different lengths, one batch.

Each position predicts a class from its token's (fixed, random) embedding, so the per-token loss
is simple; what matters is how the losses of a padded batch are combined into one number.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine import Tensor
from ..engine.guard import refusable
from ..nn import MLP
from ..nn import functional as F

_COURSE = str(Path(__file__).resolve().parent)  # the course's own wrong versions may call what it refuses

VOCAB, DIM = 5, 8
EMBEDDING = np.random.default_rng(7).standard_normal((VOCAB, DIM))


def padded_batch(lengths=(6, 3, 5, 2), pad_to: int | None = None, seed: int = 0):
    """(inputs, targets, mask): token ids and targets of shape (batch, pad_to), mask 1 on real tokens."""
    pad_to = max(lengths) if pad_to is None else pad_to
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, (len(lengths), max(lengths)))
    targets = (tokens + 1) % VOCAB
    mask = (np.arange(max(lengths)) < np.array(lengths)[:, None]).astype(float)
    extra = pad_to - max(lengths)
    pad = lambda a: np.concatenate([a * (mask > 0), np.zeros((len(lengths), extra), dtype=a.dtype)], axis=1)
    return pad(tokens).astype(int), pad(targets).astype(int), pad(mask)


def make_model(seed: int = 0) -> MLP:
    return MLP([DIM, 16, VOCAB], seed=seed)


def token_losses(model, inputs, targets) -> Tensor:
    """The loss of every position, padding included: shape (batch, positions)."""
    logits = model(Tensor(EMBEDDING[inputs]))  # (batch, positions, classes)
    batch, positions, classes = logits.shape
    losses = F.cross_entropy(logits.reshape(-1, classes), np.asarray(targets).reshape(-1), reduction="none")
    return losses.reshape(batch, positions)


@refusable("course.masked_mean", "the course's masked_mean", except_from=_COURSE)
def masked_mean(losses, mask):
    """The right reduction: mask first, then divide by the number of real tokens."""
    return (losses * mask).sum() / float(np.sum(mask))


def mean_over_padded(losses, mask):
    """The bug: the mask zeroes the padded losses, but the mean still divides by every position,
    padding included. The padding was not removed *before* the reduction; its count still is in it."""
    return (losses * mask).mean()


def gradient(model, reduce, batch) -> tuple[float, list]:
    """(loss, a copy of every parameter gradient) for one backward pass; gradients reset first."""
    model.zero_grad()
    inputs, targets, mask = batch
    loss = reduce(token_losses(model, inputs, targets), mask)
    loss.backward()
    return loss.item(), [p.grad.copy() for p in model.parameters()]
