"""The "layer_norm" slot: LayerNorm's backward run on your layer_norm_backward, written here from scratch (the
cs231n way, one step of the chain rule at a time), sharing no code with the course's reference."""
import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw import Tensor
from haaw.nn import TransformerBlock


def layer_norm_backward(x, weight, G, eps):
    n = x.shape[-1]
    mu = np.sum(x, axis=-1, keepdims=True) / n
    xc = x - mu
    var = np.sum(xc * xc, axis=-1, keepdims=True) / n
    inv = 1 / np.sqrt(var + eps)
    dxhat = G * weight
    dinv = np.sum(dxhat * xc, axis=-1, keepdims=True)
    dvar = dinv * -0.5 * (var + eps) ** -1.5
    dxc = dxhat * inv + dvar * 2 * xc / n
    dx = dxc - np.sum(dxc, axis=-1, keepdims=True) / n
    flat = G.reshape(-1, n)
    return dx, np.sum(flat * (xc * inv).reshape(-1, n), axis=0), np.sum(flat, axis=0)


def block_grads(dtype=np.float64):
    block = TransformerBlock(8, heads=2, seed=2, dtype=dtype)
    x = Tensor(np.random.default_rng(2).standard_normal((2, 5, 8)).astype(dtype), requires_grad=True)
    block(x, mask=F.causal_mask(5)).sum().backward()
    return [x.grad] + [p.grad for p in block.parameters()]


def test_a_transformer_block_runs_on_your_layer_norm_backward_with_the_engine_s_gradients():
    calls = []

    def mine(*args):
        calls.append(1)
        return layer_norm_backward(*args)

    expected = block_grads()
    with haaw.use(layer_norm=mine):
        ours = block_grads()
    assert len(calls) == 2  # both LayerNorms of the block
    for a, b in zip(ours, expected):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    with haaw.use(layer_norm=mine):
        assert all(g.dtype == np.float32 for g in block_grads(np.float32))


@pytest.mark.parametrize("weighted", [True, False])
def test_several_normalised_axes_and_a_missing_weight_are_served_by_a_last_axis_function(weighted):
    rng = np.random.default_rng(4)
    x0, g = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 4))
    w0, b0 = rng.standard_normal((2, 4)), rng.standard_normal((2, 4))

    def grads():
        x = Tensor(x0, requires_grad=True)
        w, b = (Tensor(a, requires_grad=True) for a in (w0, b0))
        out = F.layer_norm(x, (2, 4), w, b) if weighted else F.layer_norm(x, (2, 4))
        out.backward(g)
        return out.data, x.grad, w.grad, b.grad

    expected = grads()
    with haaw.use(layer_norm=layer_norm_backward):
        ours = grads()
    for a, b in zip(ours, expected):
        if a is None:
            assert b is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_a_wrong_shaped_gradient_from_your_layer_norm_backward_is_refused_by_name():
    def wrong(x, weight, G, eps):
        dx, dw, db = layer_norm_backward(x, weight, G, eps)
        return dx, G * weight, db  # dweight not summed over the rows

    with haaw.use(layer_norm=wrong), pytest.raises(ValueError, match="LayerNorm.*gradient of shape"):
        block_grads()
