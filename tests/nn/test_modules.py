"""Modules: parameters found by themselves, PyTorch's names, initial weights that differ per layer."""
import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw import nn
from haaw.engine import Tensor
from haaw.nn import MLP, Linear, TransformerBlock
from haaw.optim import SGD


def test_parameters_are_found_once_each_in_order_with_their_names():
    model = MLP([4, 8, 3])
    params = model.parameters()
    assert [p.shape for p in params] == [(4, 8), (8,), (8, 3), (3,)]
    assert [name for name, _ in model.named_parameters()] == ["layers.0.weight", "layers.0.bias",
                                                            "layers.1.weight", "layers.1.bias"]
    shared = Linear(3, 3)
    model.layers.append(shared)
    model.layers.append(shared)
    assert len(model.parameters()) == 6
    block = TransformerBlock(4, heads=2)
    assert "attn.q.weight" in dict(block.named_parameters()) and len(block.parameters()) == 16


def test_frozen_parameters_are_still_parameters_as_in_pytorch():
    model = MLP([3, 4, 2])
    model.layers[0].freeze()
    assert len(model.parameters()) == 4
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    model.requires_grad_(True)
    assert all(p.requires_grad for p in model.parameters())


def test_two_layers_start_from_different_weights_unless_seeded_alike():
    assert not np.array_equal(Linear(4, 4).weight.data, Linear(4, 4).weight.data)
    assert np.array_equal(Linear(4, 4, seed=3).weight.data, Linear(4, 4, seed=3).weight.data)
    haaw.manual_seed(5)
    first = MLP([2, 3, 2]).parameters()
    haaw.manual_seed(5)
    again = MLP([2, 3, 2]).parameters()
    assert all(np.array_equal(a.data, b.data) for a, b in zip(first, again))
    layers = MLP([4, 4, 4, 4], seed=0).layers
    assert not np.array_equal(layers[0].weight.data, layers[1].weight.data)
    assert all(np.array_equal(a.weight.data, b.weight.data) for a, b in zip(layers, MLP([4, 4, 4, 4], seed=0).layers))


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


def test_requires_grad__freezes_and_then_trains_again_by_default():
    model = MLP([3, 4, 2], seed=0)
    model(Tensor(np.ones((1, 3)))).sum().backward()
    assert model.requires_grad_(False) is model
    assert all(not p.requires_grad and p.grad is None for p in model.parameters())
    model.requires_grad_()  # the default: train again
    assert all(p.requires_grad for p in model.parameters())


def test_load_state_dict_copies_in_place_and_refuses_what_does_not_fit():
    """state_dict / load_state_dict as in PyTorch: names from named_parameters, values copied in place (a graph
    that saved the old values then refuses backward), a missing or unexpected name or a wrong shape refused."""

    source, target = Linear(3, 2, seed=0), Linear(3, 2, seed=1)
    weight_before = target.weight
    out = (Tensor(np.ones((1, 3))) @ target.weight).sum()
    target.load_state_dict(source.state_dict())
    assert target.weight is weight_before  # the same tensor, new numbers
    np.testing.assert_array_equal(target.weight.data, source.weight.data)
    with pytest.raises(RuntimeError, match="as it was in the forward pass"):
        out.backward()
    with pytest.raises(RuntimeError, match=r"missing \['bias'\], unexpected \['extra'\]"):
        target.load_state_dict({"weight": np.zeros((3, 2)), "extra": np.zeros(1)})
    assert target.load_state_dict({"weight": np.zeros((3, 2))}, strict=False) == (["bias"], [])
    with pytest.raises(RuntimeError, match=r"transpose PyTorch's"):
        target.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(2)})


def test_dropout_draws_what_f_dropout_draws_and_a_checkpoint_replays_it():
    x = Tensor(np.arange(1.0, 41.0).reshape(5, 8), requires_grad=True)
    haaw.manual_seed(3)
    functional = F.dropout(x, 0.4).data
    haaw.manual_seed(3)
    module = nn.Dropout(0.4)(x).data
    np.testing.assert_array_equal(module, functional)
    assert 0 < (module == 0).sum() < 40
    drop = nn.Dropout(0.4)
    out = haaw.checkpoint(lambda h: drop(h) * 2.0, x)  # the recomputation must drop the same entries
    out.sum().backward()
    np.testing.assert_array_equal(x.grad != 0, out.data != 0)


def test_eval_reaches_every_sub_module_once_and_train_turns_them_back():
    class Net(nn.Module):
        def __init__(self):
            self.blocks = [nn.Dropout(0.5), {"d": nn.Dropout(0.5)}]
            self.lin = nn.Linear(2, 2)
            self.lin.back = self  # a reference to its parent: visited once, not forever

    net = Net()
    assert net.eval() is net
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Dropout", "Dropout", "Linear"]
    assert [m.training for m in net.modules()] == [False] * 4
    x = Tensor(np.ones((3, 2)))
    np.testing.assert_array_equal(net.blocks[0](x).data, x.data)  # evaluation mode: the input itself
    assert all(m.training for m in net.train().modules())
    with pytest.raises(ValueError, match="True or False"):
        net.train("no")


def test_dropout_refuses_what_it_cannot_do():
    for p in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="from 0 to 1"):
            nn.Dropout(p)
    with pytest.raises(NotImplementedError, match="inplace"):
        nn.Dropout(0.5, inplace=True)
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25)"
