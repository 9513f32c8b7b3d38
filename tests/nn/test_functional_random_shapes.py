"""F.cross_entropy on random shapes drawn by hypothesis, with PyTorch's shapes, ignore_index, class weights and
haaw's padding mask: its gradient against finite differences and, where torch is installed, its output and
gradient against PyTorch's. (The engine's cross_entropy_rows under it: tests/engine/test_ops_random_shapes.py.)"""
import numpy as np
import pytest

pytest.importorskip("hypothesis")  # before its import: without it the file is skipped, not an error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import haaw.nn.functional as F
from haaw import Tensor
from haaw.tools import gradcheck

dims = st.integers(1, 4)
FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def is_torch(x):
    return type(x).__module__.startswith("torch")


def values(data, shape, low=-2.0, high=2.0, seed_name="x"):
    seed = data.draw(st.integers(0, 2**32 - 1), label=f"seed of {seed_name}")
    return np.random.default_rng(seed).uniform(low, high, shape)


def cross_entropy_spec(data):
    """PyTorch's shapes: logits (N, C) or (N, C, d), targets (N,) or (N, d); ignore_index, class
    weights and haaw's padding mask drawn at random."""
    n, classes = data.draw(dims, label="N"), data.draw(st.integers(2, 5), label="classes")
    extra = data.draw(st.sampled_from([(), (3,)]), label="extra dims")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="targets"))
    targets = rng.integers(0, classes, (n,) + extra)
    if data.draw(st.booleans(), label="some ignored"):
        targets[rng.random(targets.shape) < 0.3] = -100
        targets.flat[0] = 0  # at least one entry counts
    weight = rng.uniform(0.5, 2.0, classes) if data.draw(st.booleans(), label="class weights") else None
    mask = rng.integers(0, 2, targets.shape) if data.draw(st.booleans(), label="masked") else None
    if mask is not None:
        mask.flat[0] = 1
    reduction = data.draw(st.sampled_from(["mean", "sum", "none"]), label="reduction")

    def fn(logits):
        if is_torch(logits):
            import torch
            w = None if weight is None else torch.tensor(weight)
            losses = torch.nn.functional.cross_entropy(logits, torch.as_tensor(targets), weight=w, reduction="none")
            share = torch.as_tensor(targets != -100, dtype=losses.dtype)
            if weight is not None:
                share = share * w[torch.as_tensor(np.where(targets == -100, 0, targets))]
            if mask is not None:  # the mask, done by hand in torch: zero the padded losses, count the rest
                losses, share = losses * torch.as_tensor(mask), share * torch.as_tensor(mask)
            return {"none": losses, "sum": losses.sum(), "mean": losses.sum() / share.sum()}[reduction]
        return F.cross_entropy(logits, targets, weight=weight, reduction=reduction, mask=mask)
    return fn, [values(data, (n, classes) + extra, -3, 3)]


@FAST
@given(data=st.data())
def test_cross_entropy_s_gradient_matches_finite_differences(data):
    fn, arrays = cross_entropy_spec(data)
    report = gradcheck(fn, *arrays)
    assert report.ok, str(report)


@FAST
@given(data=st.data())
def test_cross_entropy_s_output_and_gradient_match_torch(data):
    torch = pytest.importorskip("torch")
    fn, arrays = cross_entropy_spec(data)
    ours = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = fn(*ours), fn(*theirs)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    upstream = np.random.default_rng(0).standard_normal(out.shape)
    out.backward(upstream)
    ref.backward(torch.tensor(upstream))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-10, atol=1e-12)
