"""What a learner coming from PyTorch types with haaw.nn, and what haaw answers: PyTorch's result, or a clear
refusal. (The engine's and the optimizers' habits: tests/engine/test_habits.py.)"""
import numpy as np
import pytest

import haaw.nn
import haaw.nn.functional as F
from haaw import Tensor
from haaw.nn import Linear

rng = np.random.default_rng(7)


def test_linear_takes_one_example_and_refuses_a_layer_without_features():
    layer = Linear(3, 2, seed=0)
    x = Tensor(rng.standard_normal(3), requires_grad=True)
    y = layer(x)
    assert y.shape == (2,)
    np.testing.assert_allclose(y.data, x.data @ layer.weight.data + layer.bias.data, rtol=1e-14)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, layer.weight.data.sum(axis=1), rtol=1e-14)
    with pytest.raises(ValueError, match="Linear: in_features must be a positive whole number, got 0"):
        Linear(0, 3)


def test_layer_norm_refuses_a_weight_of_the_wrong_shape():
    x = Tensor(rng.standard_normal((2, 4)))
    with pytest.raises(ValueError, match=r"layer_norm: the weight has shape \(3,\), but normalized_shape is \(4,\)"):
        F.layer_norm(x, (4,), weight=Tensor(np.ones(3)))


def test_a_module_finds_parameters_held_in_a_dict():
    class Heads(haaw.nn.Module):
        def __init__(self):
            self.by_name = {"a": Linear(2, 2, seed=0), "b": Tensor(np.ones(2), requires_grad=True)}

    names = [name for name, _ in Heads().named_parameters()]
    assert names == ["by_name.a.weight", "by_name.a.bias", "by_name.b"]
