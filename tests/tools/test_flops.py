import numpy as np
import pytest

from haaw.tools.flops import count_flops
from haaw.nn import MLP
from haaw.engine.tensor import Tensor

rng = np.random.default_rng(0)


def matmul_counts(x_requires_grad):
    x = Tensor(rng.standard_normal((8, 5)), requires_grad=x_requires_grad)
    w = Tensor(rng.standard_normal((5, 3)), requires_grad=True)
    with count_flops() as counter:
        y = x @ w
        y.backward(np.ones((8, 3)))
    return counter.forward["matmul"], counter.backward["matmul"]


def test_a_matmul_forward_is_2mkn():
    assert matmul_counts(False)[0] == 2 * 8 * 5 * 3


def test_backward_is_exactly_twice_the_forward_when_the_input_needs_a_gradient_too():
    forward, backward = matmul_counts(True)
    assert backward == 2 * forward


def test_backward_is_exactly_the_forward_when_only_the_weight_needs_one():
    forward, backward = matmul_counts(False)
    assert backward == forward


def test_nothing_is_counted_outside_the_block():
    with count_flops() as counter:
        pass
    Tensor(np.ones((2, 2)), requires_grad=True) @ Tensor(np.ones((2, 2)))
    assert counter.total_forward == 0
    assert "total" in counter.table()


def test_matmul_counts_agree_with_torch_flop_counter():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    x = rng.standard_normal((16, 10))
    model = MLP([10, 12, 4])
    with count_flops() as ours:
        model(Tensor(x)).sum().backward()
    params = [torch.tensor(p.data, requires_grad=True) for p in model.parameters()]
    with FlopCounterMode(display=False) as theirs:
        h = torch.relu(torch.tensor(x) @ params[0] + params[1])
        (h @ params[2] + params[3]).sum().backward()
    assert ours.forward["matmul"] + ours.backward["matmul"] == theirs.get_total_flops()
