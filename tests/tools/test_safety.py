"""The safety nets of notebook 08: in-place edits, no_grad/detach/frozen, anomalies, custom ops, the audit."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor, detect_anomaly, no_grad
from haaw.tools import gradcheck
from haaw.tools.audit import audit
from haaw.engine import Function
from haaw.nn import MLP
from haaw.optim import SGD

rng = np.random.default_rng(0)


def test_an_in_place_change_of_a_saved_value_is_caught_at_backward_and_names_the_operation():
    x = Tensor(np.ones(3))
    w = Tensor(np.full(3, 2.0), requires_grad=True)
    y = (x * w).sum()
    x += 1.0
    with pytest.raises(RuntimeError, match=r"backward of 'mul' needs input 0 \(shape \(3,\)\).*modified in place"):
        y.backward()


def test_a_saved_output_changed_in_place_is_caught_too():
    w = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    h = w.exp()  # exp saves its output for backward
    with no_grad():
        h *= 2.0  # allowed here, but versioned
    with pytest.raises(RuntimeError, match="backward of 'exp' needs its output"):
        h.sum().backward()


def test_in_place_on_a_tensor_that_requires_grad_is_refused_outside_no_grad():
    w = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"x \+= \.\.\.: in-place change of a tensor that requires a gradient"):
        w += 1.0
    with no_grad():
        w -= 0.5
    assert list(w.data) == [0.5, 0.5] and w._version == 1


def test_an_optimizer_step_between_forward_and_backward_is_caught():
    model = MLP([3, 4, 2])
    loss = F.cross_entropy(model(Tensor(rng.standard_normal((5, 3)))), np.zeros(5, dtype=int))
    for p in model.parameters():
        p.grad = np.ones_like(p.data)
    SGD(model.parameters(), lr=0.1).step()  # changes W in place while the graph still needs it
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


def test_frozen_parameters_get_no_gradient_and_the_optimizer_leaves_them_alone():
    model = MLP([3, 4, 2])
    frozen = model.layers[0].freeze()
    before = frozen.weight.data.copy()
    optimizer = SGD(model.parameters(), lr=0.5)
    assert len(model.parameters()) == 2
    F.cross_entropy(model(Tensor(rng.standard_normal((5, 3)))), np.zeros(5, dtype=int)).backward()
    optimizer.step()
    assert frozen.weight.grad is None and np.array_equal(frozen.weight.data, before)
    assert model.layers[1].weight.grad is not None


def test_detach_stops_the_gradient_and_no_grad_records_nothing():
    w = Tensor(np.ones(2), requires_grad=True)
    (w.detach() * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [1.0, 1.0])  # only the non-detached use contributes
    with no_grad():
        assert not (w * 2.0).requires_grad


def test_anomaly_mode_names_the_first_operation_that_made_nan_or_inf():
    x = Tensor(np.array([1.0, -1.0]), requires_grad=True)
    with detect_anomaly():
        with pytest.raises(FloatingPointError, match="forward of 'log'"):
            with np.errstate(invalid="ignore"):
                x.log()
        z = Tensor(np.zeros(2), requires_grad=True)
        y = (z**0.5).sum()
        with pytest.raises(FloatingPointError, match="backward of 'pow'"):
            with np.errstate(divide="ignore", invalid="ignore"):
                y.backward()
    with np.errstate(invalid="ignore"):
        assert np.isnan(x.log().data[1])  # outside anomaly mode: plain NumPy behaviour


def test_gradcheck_catches_a_custom_op_whose_backward_does_not_match():
    right = custom_op("square", lambda a: (a * a, (a,)), lambda g, saved: 2 * g * saved[0])
    wrong = custom_op("square", lambda a: (a * a, (a,)), lambda g, saved: g * saved[0])
    x = np.array([1.0, -2.0, 3.0])
    assert gradcheck(right, x).ok
    assert not gradcheck(wrong, x).ok
    broken = custom_op("pair", lambda a, b: (a * b, (a, b)), lambda g, saved: g * saved[1])
    with pytest.raises(ValueError, match="backward returned 1 gradient"):
        broken(Tensor(x, requires_grad=True), Tensor(x, requires_grad=True)).sum().backward()


B, T, V, D = 4, 6, 5, 8
EMB = rng.standard_normal((V, D))
INPUTS, TARGETS = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
MASK = np.ones((B, T))
MASK[0, 4:] = 0
MASK[2, 2:] = 0


def token_losses(model, inputs, targets):
    return F.cross_entropy(model(Tensor(EMB[inputs])), targets, reduction="none")


def per_token(losses, mask):
    return (losses * mask).sum() / float(mask.sum())


@pytest.mark.parametrize("reduce, failing", [
    (per_token, []),
    (lambda L, m: L.mean(), ["mask before the reduction", "independent of padding length", "loss unit"]),
    (lambda L, m: (L * m).mean(), ["independent of padding length", "loss unit"]),
    (lambda L, m: ((L * m).sum(axis=1) / m.sum(axis=1)).mean(), ["loss unit"]),
])
def test_the_audit_names_what_is_wrong_with_the_reduction(reduce, failing):
    report = audit(MLP([D, 16, V]), token_losses, reduce, (INPUTS, TARGETS, MASK))
    assert report.failed == failing
    assert str(report).startswith("audit: ")


def test_the_audit_sees_stale_gradients_frozen_updates_custom_ops_and_accumulation():
    model = MLP([D, 16, V])
    model.layers[0].weight.grad = np.ones_like(model.layers[0].weight.data)
    model.layers[1].freeze()
    wrong = custom_op("square", lambda a: (a * a, (a,)), lambda g, saved: g * saved[0])
    report = audit(model, token_losses, per_token, (INPUTS, TARGETS, np.ones((B, T))), optimizer=SGD(model.parameters(), 0.1),
                   accumulation=2, accumulation_scale=1.0, custom_ops=[(wrong, (np.array([1.0, 2.0]),))])
    assert report.failed == ["gradients zeroed", "gradcheck of square", "accumulation over 2 microbatches"]
    assert "2× the one-batch gradient: scale each microbatch loss by 1/2" in str(report)
    assert "frozen parameters untouched: 2 frozen tensor(s)" in str(report)
    fixed = audit(model, token_losses, per_token, (INPUTS, TARGETS, np.ones((B, T))), accumulation=2, accumulation_scale=0.5)
    assert "accumulation over 2 microbatches" not in fixed.failed


def test_the_audit_restores_weights_and_gradients():
    model = MLP([D, 16, V])
    before = [p.data.copy() for p in model.parameters()]
    audit(model, token_losses, per_token, (INPUTS, TARGETS, MASK), optimizer=SGD(model.parameters(), 1.0), accumulation=2)
    assert all(np.array_equal(p.data, b) and p.grad is None for p, b in zip(model.parameters(), before))
