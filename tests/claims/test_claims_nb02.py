"""The claims of notebook 02: each figure or causal claim the notebook states, asserted."""
import pytest

from haaw import Value
from haaw.engine import autograd
from haaw.engine.forward_mode import forward_mode_gradient


def test_02_a_value_used_twice_receives_the_sum_of_both_contributions():
    a, b = Value(3.0), Value(4.0)
    (a * b + a).backward()
    by_hand = b.data * 1.0 + 1.0  # through a·b, plus through the +
    assert a.grad == by_hand == 5.0
    torch = pytest.importorskip("torch")
    ta = torch.tensor(3.0, dtype=torch.float64, requires_grad=True)
    (ta * torch.tensor(4.0, dtype=torch.float64) + ta).backward()
    assert ta.grad.item() == a.grad


def test_02_shared_weight_gradient_is_the_sum_over_its_uses():
    def unrolled(weights, xs=(0.5, -1.0, 2.0)):
        h = Value(0.4)
        for weight, x_t in zip(weights, xs):
            h = (weight * h + x_t).tanh()
        return (h - 0.3) ** 2

    shared = Value(0.7)
    unrolled([shared] * 3).backward()
    copies = [Value(0.7) for _ in range(3)]
    unrolled(copies).backward()
    assert all(c.grad != 0 for c in copies)
    assert shared.grad == pytest.approx(sum(c.grad for c in copies), rel=1e-12)


def test_02_reverse_mode_one_backward_pass_forward_mode_one_pass_per_parameter(monkeypatch):
    n = 9

    def loss(*params):
        z = params[-1]
        for i, p in enumerate(params[:-1]):
            z = z + p * (0.3 * i - 1.0)
        return (z.tanh() - 0.25) ** 2

    values = [0.1 * (i - 4) for i in range(n)]
    calls = {"f": 0, "backward": 0}

    def counted(*params):
        calls["f"] += 1
        return loss(*params)

    forward_grads, passes = forward_mode_gradient(counted, values)
    assert passes == calls["f"] == n

    real_backward = autograd.backward

    def counted_backward(*args, **kwargs):
        calls["backward"] += 1
        return real_backward(*args, **kwargs)

    monkeypatch.setattr(autograd, "backward", counted_backward)
    calls["f"] = 0
    params = [Value(v) for v in values]
    counted(*params).backward()
    assert calls == {"f": 1, "backward": 1}
    assert [p.grad for p in params] == pytest.approx(forward_grads, rel=1e-12)
