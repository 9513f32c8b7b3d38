"""A safety net of notebook 08 that haaw.nn provides: a frozen layer gets no gradient and no update. (The engine's
nets, in-place edits, no_grad, detach and anomalies: tests/engine/test_safety.py.)"""
import numpy as np

import haaw.nn.functional as F
from haaw import Tensor
from haaw.nn import MLP
from haaw.optim import SGD

rng = np.random.default_rng(0)


def test_frozen_parameters_get_no_gradient_and_the_optimizer_leaves_them_alone():
    model = MLP([3, 4, 2])
    frozen = model.layers[0].freeze()
    before = frozen.weight.data.copy()
    optimizer = SGD(model.parameters(), lr=0.5)
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    F.cross_entropy(model(Tensor(rng.standard_normal((5, 3)))), np.zeros(5, dtype=int)).backward()
    optimizer.step()
    assert frozen.weight.grad is None and np.array_equal(frozen.weight.data, before)
    assert model.layers[1].weight.grad is not None
