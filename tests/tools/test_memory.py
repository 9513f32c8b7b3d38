"""Memory accounting and checkpointing (identical gradients, less memory). (Notebook 06's memory calculator:
tests/course/test_nb06.py.)"""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.engine import checkpoint
from haaw.tools.flops import count_flops
from haaw.tools.memory import track_memory
from haaw.nn import MLP, Linear

rng = np.random.default_rng(0)


def test_saved_bytes_per_operation_and_the_peak():
    model = MLP([64, 128, 128, 10])
    x = Tensor(rng.standard_normal((32, 64)))
    with track_memory() as memory:
        loss = F.cross_entropy(model(x), np.zeros(32, dtype=int))
        at_end_of_forward = memory.current
        loss.backward()
    relu_outputs = 2 * 32 * 128 * 8
    assert memory.by_op["relu"] == [2, relu_outputs]
    assert memory.by_op["linear"] == [3, relu_outputs]  # the same arrays: saved twice, stored once
    log_probabilities, targets = 32 * 10 * 8, 32 * 8  # what cross-entropy keeps: float64 and int64
    assert memory.by_op["cross_entropy_rows"] == [1, log_probabilities + targets]
    assert memory.peak == at_end_of_forward == relu_outputs + log_probabilities + targets
    assert memory.current == 0  # backward has used everything
    assert "peak alive at once" in memory.table()


def blocks(n=6, width=16):
    ups = [Linear(width, 4 * width, seed=i) for i in range(n)]
    downs = [Linear(4 * width, width, seed=100 + i) for i in range(n)]
    return [(lambda h, u=u, d=d: h + d(F.gelu(u(F.layer_norm(h, h.shape[-1:]))))) for u, d in zip(ups, downs)], ups + downs


def run(mode, x0):
    fns, layers = blocks()
    x = Tensor(x0, requires_grad=True)
    with track_memory() as memory, count_flops() as counter:
        h = x
        for fn in fns:
            h = checkpoint(fn, h) if mode == "checkpoint" else fn(h)
        (h * h).sum().backward()
    return memory, counter, x.grad, [p.grad for layer in layers for p in layer.parameters()]


def test_checkpointing_gives_identical_gradients_with_less_memory_and_more_compute():
    x0 = rng.standard_normal((8, 16))
    plain_mem, plain_flops, plain_dx, plain_grads = run("plain", x0)
    ckpt_mem, ckpt_flops, ckpt_dx, ckpt_grads = run("checkpoint", x0)
    np.testing.assert_array_equal(ckpt_dx, plain_dx)
    for a, b in zip(ckpt_grads, plain_grads):
        np.testing.assert_array_equal(a, b)
    assert ckpt_mem.peak < plain_mem.peak / 2
    loss_flops = 2 * 8 * 16  # h * h and its sum: outside the checkpointed blocks
    assert ckpt_flops.total_forward == plain_flops.total_forward
    assert ckpt_flops.total_recompute == plain_flops.total_forward - loss_flops
    assert ckpt_flops.total_backward == plain_flops.total_backward


def test_checkpointing_matches_torch_utils_checkpoint():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    x0 = rng.standard_normal((4, 8))
    w0 = rng.standard_normal((8, 8))
    x, w = Tensor(x0, requires_grad=True), Tensor(w0, requires_grad=True)
    checkpoint(lambda h: (h @ w).tanh() @ w, x).sum().backward()
    xt, wt = torch.tensor(x0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    torch_checkpoint(lambda h: torch.tanh(h @ wt) @ wt, xt, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(w.grad, wt.grad.numpy(), rtol=1e-12)


def test_checkpoint_rejects_a_function_that_returns_no_tensor():
    with pytest.raises(TypeError, match="fn must return a Tensor"):
        checkpoint(lambda h: 3.0, Tensor(np.ones(2)))


def test_checkpoint_gives_the_weights_inside_their_gradient_even_when_its_input_needs_none():
    x0, w0 = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    w = Tensor(w0, requires_grad=True)
    out = checkpoint(lambda h: (h @ w).tanh(), Tensor(x0))
    out.sum().backward()
    np.testing.assert_allclose(w.grad, x0.T @ (1 - np.tanh(x0 @ w0) ** 2), rtol=1e-12)  # d/dW Σ tanh(XW)


class _Holder:
    def __init__(self, kept):
        self.kept = kept


@pytest.mark.parametrize("keep, expected", [
    ("tuple", 3 * 800), ("list", 3 * 800), ("dict", 3 * 800), ("attribute", 3 * 800), ("nested", 3 * 800),
    ("twice", 800), ("tensor", 800), ("function", 0), ("module", 0),
])
def test_every_array_an_operation_keeps_is_counted_whatever_holds_it(keep, expected):
    """A custom operation keeps three fresh 100-number float64 arrays (800 bytes each) on ctx in a given holder;
    the tracker's peak is their bytes, counted by hand. Code kept to run again (a function, a module) is not
    memory kept for backward; an array kept twice is counted once."""
    import types

    from haaw import Function

    layer = Linear(100, 100)

    class Keeps(Function):
        @staticmethod
        def forward(ctx, x):
            a, b, c = x + 1, x + 2, x + 3  # fresh arrays, none of them the input
            ctx.kept = {"tuple": (a, b, c), "list": [a, b, c], "dict": {"a": a, "b": b, "c": c},
                        "attribute": types.SimpleNamespace(a=a, b=b, c=c), "nested": _Holder([a, {"b": (b, [c])}]),
                        "twice": [a, a, (a,)], "tensor": Tensor(a), "function": np.tanh, "module": layer}[keep]
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g

    x = Tensor(np.zeros(100), requires_grad=True)
    with track_memory() as memory:
        Keeps.apply(x).sum().backward()
    assert memory.peak == expected


def test_a_result_selective_checkpointing_reuses_is_counted_as_the_forward_pass_counts_it():
    """Inside backward, a checkpoint's recomputation reuses the matmul it kept (save=("matmul",)) rather than
    computing it again; the memory tracker must hear of it as of the forward pass's own matmul: its context and
    result when it is recorded (x @ w), nothing when it is not (c @ c, no input needs a gradient)."""
    import haaw
    from haaw.tools.memory import track_memory
    rng = np.random.default_rng(0)
    x = haaw.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    w = haaw.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    c = haaw.tensor(rng.standard_normal((5, 5)))

    def f(h):
        return (h @ w).tanh() @ (c @ c)

    with track_memory() as plain:
        f(x)
    loss = haaw.checkpoint(f, x, save=("matmul",)).sum()
    with track_memory() as again:  # hears only the recomputation
        loss.backward()
    assert dict(again.by_op) == dict(plain.by_op)
    # x @ w and tanh's output @ (c @ c): x, w and c @ c (not recorded) are leaves, not counted; tanh's output is
    assert again.by_op["matmul"] == [2, 4 * 5 * 8]
    assert again.peak == plain.peak and again.current == 0  # and all of it released by the end of backward
