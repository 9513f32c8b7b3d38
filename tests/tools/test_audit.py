"""The audit of one training step: the source text's checklist, run automatically."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.engine import Function
from haaw.nn import MLP
from haaw.optim import SGD
from haaw.tools.audit import audit

rng = np.random.default_rng(0)


class WrongSquare(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.a = a
        return a * a

    @staticmethod
    def backward(ctx, g):
        return g * ctx.a  # the 2 is missing


B, T, V, D = 4, 6, 5, 8
EMB = rng.standard_normal((V, D))
INPUTS, TARGETS = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
MASK = np.ones((B, T))
MASK[0, 4:] = 0
MASK[2, 2:] = 0


def token_losses(model, inputs, targets):
    losses = F.cross_entropy(model(Tensor(EMB[inputs])).reshape(-1, V), targets.reshape(-1), reduction="none")
    return losses.reshape(targets.shape)


def per_token(losses, mask):
    return (losses * mask).sum() / float(mask.sum())


@pytest.mark.parametrize("reduce, failing", [
    (per_token, []),
    (lambda L, m: L.mean(), ["mask before the reduction", "independent of padding length", "loss unit"]),
    (lambda L, m: (L * m).mean(), ["independent of padding length", "loss unit"]),
    (lambda L, m: ((L * m).sum(dim=1) / m.sum(axis=1)).mean(), ["loss unit"]),
])
def test_the_audit_names_what_is_wrong_with_the_reduction(reduce, failing):
    report = audit(MLP([D, 16, V]), token_losses, reduce, (INPUTS, TARGETS, MASK))
    assert report.failed == failing
    assert str(report).startswith("audit: ")


def test_the_audit_sees_stale_gradients_frozen_updates_custom_ops_and_accumulation():
    model = MLP([D, 16, V])
    model.layers[0].weight.grad = np.ones_like(model.layers[0].weight.data)
    model.layers[1].freeze()
    report = audit(model, token_losses, per_token, (INPUTS, TARGETS, np.ones((B, T))), optimizer=SGD(model.parameters(), 0.1),
                   accumulation=2, accumulation_scale=1.0, custom_ops=[(WrongSquare.apply, (np.array([1.0, 2.0]),))])
    assert report.failed == ["gradients zeroed", "gradcheck of WrongSquare", "accumulation over 2 microbatches"]
    assert "2× the one-batch gradient: scale each microbatch loss by 1/2" in str(report)
    assert "frozen parameters untouched: 2 frozen tensor(s)" in str(report)
    fixed = audit(model, token_losses, per_token, (INPUTS, TARGETS, np.ones((B, T))), accumulation=2, accumulation_scale=0.5)
    assert "accumulation over 2 microbatches" not in fixed.failed


def test_the_audit_restores_weights_and_gradients():
    model = MLP([D, 16, V], seed=0)
    before = [p.data.copy() for p in model.parameters()]
    audit(model, token_losses, per_token, (INPUTS, TARGETS, MASK), optimizer=SGD(model.parameters(), 1.0), accumulation=2)
    assert all(np.array_equal(p.data, b) and p.grad is None for p, b in zip(model.parameters(), before))
