"""FLOP counting: the conventions written out by hand for each kind of operation, and the matrix
products against PyTorch's own counter."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw.engine import Function, Tensor, checkpoint
from haaw.nn import MLP
from haaw.tools.flops import count_flops

rng = np.random.default_rng(0)


def counts(fn, *arrays, needs=None):
    """(forward, backward) flops of ``fn`` on tensors made from ``arrays``, per operation name."""
    needs = needs or [True] * len(arrays)
    tensors = [Tensor(a, requires_grad=n) for a, n in zip(arrays, needs)]
    with count_flops() as counter:
        out = fn(*tensors)
        out.backward(np.ones(out.shape))
    return dict(counter.forward), dict(counter.backward)


def matmul_counts(x_requires_grad):
    forward, backward = counts(lambda x, w: x @ w, rng.standard_normal((8, 5)), rng.standard_normal((5, 3)),
                               needs=[x_requires_grad, True])
    return forward["matmul"], backward["matmul"]


def test_a_matmul_forward_is_2mkn():
    assert matmul_counts(False)[0] == 2 * 8 * 5 * 3


def test_backward_is_exactly_twice_the_forward_when_the_input_needs_a_gradient_too():
    forward, backward = matmul_counts(True)
    assert backward == 2 * forward


def test_backward_is_exactly_the_forward_when_only_the_weight_needs_one():
    forward, backward = matmul_counts(False)
    assert backward == forward


@pytest.mark.parametrize("name, fn, shapes, needs, forward, backward", [
    # elementwise: one flop per output entry forward, and one per entry for each input that needs a gradient
    ("mul", lambda a, b: a * b, [(4, 5), (4, 5)], [True, True], 20, 40),
    ("mul", lambda a, b: a * b, [(4, 5), (4, 5)], [True, False], 20, 20),
    ("add", lambda a, b: a + b, [(4, 5), (5,)], [True, True], 20, 40),
    ("tanh", lambda a: a.tanh(), [(4, 5)], [True], 20, 20),
    ("relu", lambda a: a.relu(), [(3, 7)], [True], 21, 21),
    ("softmax", lambda a: a.softmax(-1), [(3, 7)], [True], 21, 21),
    # reductions: one flop per input entry, forward and backward
    ("sum", lambda a: a.sum(dim=1), [(4, 6)], [True], 24, 24),
    ("mean", lambda a: a.mean(), [(4, 6)], [True], 24, 24),
    # moving data costs nothing
    ("reshape", lambda a: a.reshape(-1), [(4, 6)], [True], 0, 0),
    ("permute", lambda a: a.transpose(0, 1), [(4, 6)], [True], 0, 0),
    # a linear layer: 2k per output entry (k multiplies, k − 1 adds, the bias), its bias gradient a sum
    ("linear", lambda x, w, b: F.linear(x, w, b), [(8, 5), (5, 3), (3,)], [True, True, True],
     2 * 8 * 5 * 3, 2 * (2 * 8 * 5 * 3) + 8 * 3),
    ("linear", lambda x, w, b: F.linear(x, w, b), [(8, 5), (5, 3), (3,)], [False, True, True],
     2 * 8 * 5 * 3, 2 * 8 * 5 * 3 + 8 * 3),
    # a batch of sequences: k is the input's last axis, whatever comes before it
    ("linear", lambda x, w, b: F.linear(x, w, b), [(2, 8, 5), (5, 3), (3,)], [True, True, True],
     2 * 2 * 8 * 5 * 3, 2 * (2 * 2 * 8 * 5 * 3) + 2 * 8 * 3),
])
def test_each_kind_of_operation_is_counted_by_its_convention(name, fn, shapes, needs, forward, backward):
    f, b = counts(fn, *(rng.standard_normal(s) for s in shapes), needs=needs)
    assert (f[name], b[name]) == (forward, backward)


def test_nothing_is_counted_outside_the_block():
    with count_flops() as counter:
        pass
    Tensor(np.ones((2, 2)), requires_grad=True) @ Tensor(np.ones((2, 2)))
    assert counter.total_forward == 0
    assert "total" in counter.table()


def test_checkpointing_counts_its_second_forward_as_recomputation():
    w = Tensor(rng.standard_normal((6, 6)), requires_grad=True)
    x = Tensor(rng.standard_normal((4, 6)), requires_grad=True)
    with count_flops() as counter:
        checkpoint(lambda h: (h @ w).tanh(), x).sum().backward()
    assert counter.recompute == {"matmul": 2 * 4 * 6 * 6, "tanh": 24}
    assert counter.forward["matmul"] == 2 * 4 * 6 * 6


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("x_shape, w_shape", [((16, 10), (10, 12)), ((3, 16, 10), (10, 12)), ((3, 4, 5), (3, 5, 2))])
def test_matmul_counts_agree_with_torch_flop_counter(torch, x_shape, w_shape):
    from torch.utils.flop_counter import FlopCounterMode

    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    f, b = counts(lambda x, w: x @ w, x, w)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    with FlopCounterMode(display=False) as theirs:
        out = xt @ wt
    forward = theirs.get_total_flops()
    with FlopCounterMode(display=False) as theirs:
        out.backward(torch.ones_like(out))
    assert (f["matmul"], b["matmul"]) == (forward, theirs.get_total_flops())


def test_an_mlp_s_linear_layers_agree_with_torch_flop_counter(torch):
    """PyTorch counts the matrix products (its addmm includes the bias add); it does not count the
    bias gradient's sum, so that is left out here (the bias does not require a gradient)."""
    from torch.utils.flop_counter import FlopCounterMode

    x = rng.standard_normal((16, 10))
    model = MLP([10, 12, 4])
    for layer in model.layers:
        layer.bias.requires_grad = False
    with count_flops() as ours:
        model(Tensor(x)).sum().backward()
    params = [torch.tensor(p.data, requires_grad=p.requires_grad) for p in model.parameters()]
    with FlopCounterMode(display=False) as theirs:
        h = torch.relu(torch.nn.functional.linear(torch.tensor(x), params[0].T, params[1]))
        torch.nn.functional.linear(h, params[2].T, params[3]).sum().backward()
    assert ours.forward["linear"] + ours.backward["linear"] == theirs.get_total_flops()


class Cube(Function):
    @staticmethod
    def forward(ctx, a):
        ctx.a = a
        return a * a * a

    @staticmethod
    def backward(ctx, g):
        return 3 * ctx.a * ctx.a * g


def test_a_custom_function_counts_no_flops_its_numpy_work_is_invisible_to_the_counter():
    forward, backward = counts(Cube.apply, rng.standard_normal((4, 5)))
    assert (forward, backward) == ({"Cube": 0}, {"Cube": 0})
