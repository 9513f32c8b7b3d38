import numpy as np
import pytest

import haaw.nn.functional as F
from haaw.nn import MLP, Linear
from haaw.optim import SGD
from haaw.engine.tensor import Tensor


def test_parameters_are_found_once_each_in_order():
    model = MLP([4, 8, 3])
    params = model.parameters()
    assert [p.shape for p in params] == [(4, 8), (8,), (8, 3), (3,)]
    shared = Linear(3, 3)
    model.layers.append(shared)
    model.layers.append(shared)
    assert len(model.parameters()) == 6


def test_an_mlp_with_cross_entropy_matches_torch_to_1e_10():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 5)), rng.integers(0, 4, 16)
    model = MLP([5, 7, 6, 4], activation="tanh")
    loss = F.cross_entropy(model(Tensor(x)), y)
    loss.backward()

    h = torch.tensor(x)
    weights = [torch.tensor(p.data, requires_grad=True) for p in model.parameters()]
    for i in range(0, len(weights), 2):
        h = h @ weights[i] + weights[i + 1]
        if i < len(weights) - 2:
            h = torch.tanh(h)
    ref = torch.nn.functional.cross_entropy(h, torch.tensor(y))
    ref.backward()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    for p, q in zip(model.parameters(), weights):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_sgd_steps_downhill_and_zero_grad_resets():
    rng = np.random.default_rng(1)
    x, y = Tensor(rng.standard_normal((32, 2))), (rng.standard_normal(32) > 0).astype(int)
    model = MLP([2, 8, 2])
    opt = SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_sgd_and_mlp_errors_are_clear():
    with pytest.raises(ValueError, match="SGD got no parameters"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="activation must be"):
        MLP([2, 2], activation="swish")
