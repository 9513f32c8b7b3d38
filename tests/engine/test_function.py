"""Custom operations and checkpointing (haaw/engine/function.py), against closed forms and PyTorch."""
import numpy as np
import pytest

import haaw
from haaw import Tensor


@pytest.mark.parametrize("checkpoint_first", [False, True])
def test_a_checkpoint_that_captures_an_outer_intermediate_counts_each_path_once(checkpoint_first):
    # L = Σ h + Σ z·h with h = 2x: dL/dx = 2 + 2z, dL/dz = h, whatever the order of the two terms
    x, z = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 5.0], requires_grad=True)
    h = x * 2
    outer, inner = h.sum(), haaw.checkpoint(lambda t: t * h, z).sum()
    (inner + outer if checkpoint_first else outer + inner).backward()
    np.testing.assert_array_equal(x.grad, [8.0, 12.0])
    np.testing.assert_array_equal(z.grad, [2.0, 4.0])


def test_two_checkpoints_sharing_a_captured_intermediate_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))

    def run(lib, x, w, ckpt):
        h = (x @ w).tanh()
        a = ckpt(lambda t: (t * h).exp(), x)
        b = ckpt(lambda t: t @ w * h, a)
        return (b.sum() + (h * h).sum() + a.sum())

    x, w = Tensor(xs.copy(), requires_grad=True), Tensor(ws.copy(), requires_grad=True)
    run(haaw, x, w, haaw.checkpoint).backward()
    xt, wt = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    run(torch, xt, wt, lambda f, t: torch_checkpoint(f, t, use_reentrant=False)).backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.grad, wt.grad.numpy(), rtol=1e-10)
