"""The "cross_entropy" slot: the backward of the engine's cross_entropy_rows (which F.cross_entropy calls) run on
your cross_entropy_forward_backward, written here from scratch (one row at a time), sharing no code with the
course's reference."""
import numpy as np
import pytest

import haaw
from haaw.engine.tensor import Tensor, apply


def mine(logits, targets):
    B = len(targets)
    grad = np.zeros_like(logits)
    loss = 0.0
    for b in range(B):
        e = np.exp(logits[b] - np.max(logits[b]))
        grad[b] = e / e.sum() / B
        grad[b, targets[b]] -= 1 / B
        loss -= np.log(e[targets[b]] / e.sum()) / B
    return loss, grad


def grads(reduction="mean", dtype=np.float64):
    """A network of 3 inputs, 5 tanh units and 4 classes, written with the engine's operations alone."""
    rng = np.random.default_rng(1)
    params = [Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
              for shape in ((3, 5), (5,), (5, 4), (4,))]
    w1, b1, w2, b2 = params
    x = Tensor(np.random.default_rng(3).standard_normal((6, 3)).astype(dtype))
    targets = np.array([0, 3, 1, 1, 2, 0])
    losses = apply("cross_entropy_rows", (x @ w1 + b1).tanh() @ w2 + b2, targets=targets)
    (losses.mean() if reduction == "mean" else losses.sum()).backward()
    return [p.grad for p in params]


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_a_network_trains_on_your_cross_entropy_with_the_engine_s_gradients(reduction):
    calls = []

    def counted(*args):
        calls.append(1)
        return mine(*args)

    expected = grads(reduction)
    with haaw.use(cross_entropy=counted):
        ours = grads(reduction)
    assert calls == [1]
    for a, b in zip(ours, expected):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def test_outside_the_with_block_the_engine_s_own_runs_again():
    calls = []
    with haaw.use(cross_entropy=lambda z, t: calls.append(1) or mine(z, t)):
        pass
    grads()
    assert calls == []


def test_a_gradient_of_the_wrong_shape_is_refused_naming_the_operation():
    with haaw.use(cross_entropy=lambda z, t: (0.0, np.zeros(z.shape[1]))):
        with pytest.raises(Exception, match="cross_entropy"):
            grads()


def test_a_function_that_returns_only_the_gradient_is_taken_as_the_gradient():
    """The slot also takes dL/dlogits alone, without the loss; two rows, so that the gradient's own rows could be
    mistaken for a (loss, gradient) pair."""
    logits = np.array([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])
    targets = np.array([2, 0])
    expected = mine(logits, targets)[1] * 2  # the mean's gradient, times B: one loss per row, each with g = 1
    z = Tensor(logits, requires_grad=True)
    with haaw.use(cross_entropy=lambda z, t: mine(z, t)[1]):
        apply("cross_entropy_rows", z, targets=targets).sum().backward()
    np.testing.assert_allclose(z.grad, expected, rtol=1e-12)
