"""haaw.use with the slots haaw.nn declares: your softmax_backward and attention_backward run in a TransformerBlock
and in F.scaled_dot_product_attention, with every mask and scale it takes. (The engine's slots and use() itself:
tests/engine/test_plugins.py.)"""
import importlib

import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw import Tensor
from haaw.engine import plugins
from haaw.nn import TransformerBlock


# correct implementations, written here from the formulas (not the engine's code)
def softmax_backward(s, G):
    return s * (G - (G * s).sum(axis=-1, keepdims=True))


def attention_backward(Q, K, V, mask, G):
    d = Q.shape[-1]
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d)
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    top = np.max(S, axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))
    total = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) / np.sqrt(d)
    return dS @ K, np.swapaxes(dS, -1, -2) @ Q, dV


def test_a_transformer_block_runs_on_your_softmax_and_attention_backward():
    def grads():
        block = TransformerBlock(8, heads=2, seed=2)
        x = Tensor(np.random.default_rng(2).standard_normal((2, 5, 8)), requires_grad=True)
        block(x, mask=F.causal_mask(5)).sum().backward()
        return [x.grad] + [p.grad for p in block.parameters()]
    expected = grads()
    with haaw.use(softmax=softmax_backward, attention=attention_backward):
        ours = grads()
    for a, b in zip(ours, expected):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_your_attention_backward_takes_the_default_scale_given_explicitly_and_refuses_another():
    rng_ = np.random.default_rng(5)
    q, k, v = (Tensor(rng_.standard_normal((2, 3, 16)), requires_grad=True) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v)
    with haaw.use(attention=attention_backward):
        out = F.scaled_dot_product_attention(q, k, v, scale=0.25)  # 1/√16, written out
        np.testing.assert_allclose(out.data, expected.data, rtol=1e-12)
        with pytest.raises(ValueError, match="assumes the scale 1/√d_k; this call asks for 0.5"):
            F.scaled_dot_product_attention(q, k, v, scale=0.5)


def test_your_attention_backward_gets_the_causal_mask_when_is_causal_is_set():
    rng_ = np.random.default_rng(6)
    q = Tensor(rng_.standard_normal((2, 3, 16)), requires_grad=True)  # 3 queries, 4 keys, d_k = 16
    k, v = (Tensor(rng_.standard_normal((2, 4, 16)), requires_grad=True) for _ in range(2))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with haaw.use(attention=attention_backward):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(out.data, expected.data, rtol=1e-12)


def test_your_attention_backward_gets_the_given_mask_and_the_causal_one_together_and_keeps_float32():
    rng_ = np.random.default_rng(7)
    q, k, v = (Tensor(rng_.standard_normal((2, 4, 8)).astype(np.float32), requires_grad=True) for _ in range(3))
    keep = np.array([True, False, True, True])  # the second key hidden from every query
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)
    with haaw.use(attention=attention_backward):
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)
    assert out.dtype == expected.dtype == np.float32
    np.testing.assert_allclose(out.data, expected.data, rtol=1e-5)


def test_reloading_a_module_that_declares_slots_declares_them_again():
    functional = importlib.reload(F)
    assert "attention" in plugins.SLOTS and functional.scaled_dot_product_attention


def test_your_attention_backward_takes_the_default_scale_written_as_a_power():
    rng_ = np.random.default_rng(9)
    q, k, v = (Tensor(rng_.standard_normal((2, 3, 8)), requires_grad=True) for _ in range(3))
    with haaw.use(attention=attention_backward):
        F.scaled_dot_product_attention(q, k, v, scale=8 ** -0.5)  # 8 ** -0.5 and 1 / np.sqrt(8) differ in the last bit


def test_attention_names_a_query_and_key_that_cannot_be_multiplied_before_fitting_a_mask():
    # a 1-D query is refused before any product, as PyTorch refuses it (test_differential compares the two)
    with pytest.raises(RuntimeError, match=r"need at least 2 axes each.*got query \(8,\), key \(4, 8\)"):
        F.scaled_dot_product_attention(Tensor(np.ones(8)), Tensor(np.ones((4, 8))), Tensor(np.ones((4, 8))))
    with pytest.raises(ValueError, match=r"batch dimensions \(2,\) and \(3,\) do not broadcast"):
        F.scaled_dot_product_attention(Tensor(np.ones((2, 4, 8))), Tensor(np.ones((3, 4, 8))), Tensor(np.ones((3, 4, 8))),
                                       attn_mask=np.ones((3, 4, 4), dtype=bool))


def test_your_attention_backward_serves_a_key_and_value_shared_by_every_sequence():
    """Keys and values of shape (T, d) broadcast across a batch of queries (B, T, d): the engine's own path sums
    their gradients back over the batch, and so must the path that runs your attention_backward."""
    rng_ = np.random.default_rng(11)
    q0, k0, v0 = rng_.standard_normal((2, 4, 8)), rng_.standard_normal((4, 8)), rng_.standard_normal((4, 8))

    def grads():
        q, k, v = (Tensor(a, requires_grad=True) for a in (q0, k0, v0))
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        return q.grad, k.grad, v.grad

    expected = grads()
    with haaw.use(attention=attention_backward):
        ours = grads()
    for a, b in zip(ours, expected):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# The tests below were written against the survivors of a mutation run of haaw/nn/functional.py alone
# (docs/mutation-survivors.md).

def test_your_attention_backward_refuses_a_floating_point_mask_and_a_scale_off_in_the_ninth_digit_in_full():
    q = Tensor(np.ones((2, 3, 4)))
    with haaw.use(attention=attention_backward):
        with pytest.raises(TypeError) as floats:
            F.scaled_dot_product_attention(q, q, q, attn_mask=np.zeros((3, 3)))
        assert str(floats.value) == ("attention: your attention_backward takes a boolean mask (True: may attend); "
                                     "this call passes a floating-point mask, which is added to the scores")
        with pytest.raises(ValueError) as scale:
            F.scaled_dot_product_attention(q, q, q, scale=0.5 * (1 + 1e-9))
        assert str(scale.value) == "attention: your attention_backward assumes the scale 1/√d_k; this call asks for 0.5"


def test_return_weights_gives_the_weights_while_your_attention_backward_is_in_use():
    rng_ = np.random.default_rng(10)
    q, k, v = (Tensor(rng_.standard_normal((3, 4))) for _ in range(3))
    expected_out, expected_weights = F.scaled_dot_product_attention(q, k, v, return_weights=True)
    with haaw.use(attention=attention_backward):
        out, weights = F.scaled_dot_product_attention(q, k, v, return_weights=True)
    np.testing.assert_allclose(out.data, expected_out.data, rtol=1e-12)
    np.testing.assert_allclose(weights.data, expected_weights.data, rtol=1e-12)
    np.testing.assert_allclose(weights.data.sum(axis=-1), 1.0, rtol=1e-12)


def _wrong_dq(how):
    def backward(Q, K, V, mask, G):
        dQ, dK, dV = attention_backward(Q, K, V, mask, G)
        return {"transposed": (np.swapaxes(dQ, -1, -2), dK, dV), "first row": (dQ[:1], dK, dV),
                "four": (dQ, dK, dV, np.zeros(1)),
                "batched and wider": (np.ones((2,) + dQ.shape[:-1] + (dQ.shape[-1] + 1,)), dK, dV)}[how]
    return backward


@pytest.mark.parametrize("how, message", [
    ("batched and wider", "the backward of '_AttentionWithYourBackward' returned a gradient of shape (2, 3, 5) for "
                          "its input 0, which has shape (3, 4): a gradient has the shape of what it is the "
                          "gradient of"),  # a gradient that no sum over a batch can fit is shown as it came
    ("transposed", "the backward of '_AttentionWithYourBackward' returned a gradient of shape (2, 4, 3) for its "
                   "input 0, which has shape (2, 3, 4): a gradient has the shape of what it is the gradient of"),
    ("first row", "the backward of '_AttentionWithYourBackward' returned a gradient of shape (1, 3, 4) for its "
                  "input 0, which has shape (2, 3, 4): a gradient has the shape of what it is the gradient of"),
    ("four", "_AttentionWithYourBackward.backward returned 6 gradient(s) for the 5 argument(s) of forward: return "
             "one per argument (None where there is none)"),
])
def test_gradients_of_the_wrong_shape_or_count_from_your_attention_backward_are_refused_in_full(how, message):
    shape = (3, 4) if how == "batched and wider" else (2, 3, 4)
    q = Tensor(np.random.default_rng(0).standard_normal(shape), requires_grad=True)
    with haaw.use(attention=_wrong_dq(how)), pytest.raises(ValueError) as error:
        F.scaled_dot_product_attention(q, q, q).sum().backward()
    assert str(error.value) == message
