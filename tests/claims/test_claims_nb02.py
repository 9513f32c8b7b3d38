"""The claims of notebook 02: each figure or causal claim the notebook states, asserted."""
import math

import numpy as np
import pytest

from haaw import Value
from haaw.course import datasets, nb02
from haaw.course.exercises.nb02 import backward
from haaw.engine import autograd, plugins
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


def test_02_a_local_derivative_holds_the_other_inputs_fixed_the_full_derivative_counts_every_path():
    a, b = Value(3.0), Value(4.0)
    ab = a * b
    L = ab + a
    L.backward()
    assert L._parents[1] is a and L._local[1] == 1.0  # ∂(ab + a)/∂a with ab held fixed
    assert a.grad == 5.0  # dL/da: through the + and through ab


def test_02_haaw_keeps_the_graph_and_leaf_grads_accumulate_over_backward_passes():
    w = Value(2.0)
    loss = (w * 3.0) ** 2
    loss.backward()
    loss.backward()  # the same graph again
    assert w.grad == 72.0
    w.zero_grad()
    for _ in range(2):
        ((w * 3.0) ** 2).backward()  # separate passes
    assert w.grad == 72.0


def test_02_pytorch_frees_the_graph_and_raises_on_a_second_backward_unless_retain_graph():
    torch = pytest.importorskip("torch")
    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    loss = (w * 3.0) ** 2
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    assert w.grad.item() == 36.0  # the failed call added nothing
    w.grad = None
    loss = (w * 3.0) ** 2
    loss.backward(retain_graph=True)
    loss.backward()
    assert w.grad.item() == 72.0
    w.grad = None
    for _ in range(2):
        ((w * 3.0) ** 2).backward()
    assert w.grad.item() == 72.0  # what accumulates in both: a leaf's .grad over separate passes


def _train(steps=15, lr=0.1):
    points, labels = nb02.moons(32, seed=0)
    model = nb02.MLP([2, 8, 8, 1], seed=0)
    losses = []
    for _ in range(steps):
        loss = sum((1 - y * model(p)).relu() for p, y in zip(points, labels)) * (1 / len(points))
        for q in model.parameters():
            q.grad = 0.0
        loss.backward()
        for q in model.parameters():
            q.data -= lr * q.grad
        losses.append(loss.data)
    return losses, model


def test_02_a_correct_backward_trains_the_small_network_exactly_as_the_engine_does():
    engine, model = _train()
    assert len(model.parameters()) == 105
    assert engine[-1] < 0.5 * engine[0]  # it learns
    with plugins.use(backward=backward):
        yours, _ = _train()
    assert max(abs(a - b) for a, b in zip(yours, engine)) <= 1e-12
    with plugins.use(backward=lambda root: backward(root, accumulate=False)):  # `=` for `+=`
        wrong, _ = _train(steps=3)  # its first update is already wrong: the second loss differs by about 0.3
    assert max(abs(a - b) for a, b in zip(wrong, engine)) > 1e-3


@pytest.mark.parametrize("n_weights", [1, 8, 64])
def test_02_counted_passes_forward_mode_one_per_parameter_reverse_mode_one_each(n_weights, monkeypatch):
    inputs = [math.sin(i + 1.0) for i in range(n_weights)]

    def loss(*params):
        *weights, bias = params
        z = bias
        for wi, xi in zip(weights, inputs):
            z = z + wi * xi
        return (z.tanh() - 0.25) ** 2

    calls = {"f": 0, "backward": 0}

    def counted(*params):
        calls["f"] += 1
        return loss(*params)

    values = [0.1 * (i - 4) for i in range(n_weights + 1)]
    _, passes = forward_mode_gradient(counted, values)
    assert passes == calls["f"] == n_weights + 1
    real_backward = autograd.backward
    monkeypatch.setattr(autograd, "backward", lambda *a, **k: (calls.__setitem__("backward", calls["backward"] + 1),
                                                               real_backward(*a, **k))[1])
    calls["f"] = 0
    counted(*[Value(v) for v in values]).backward()
    assert calls == {"f": 1, "backward": 1}


def test_02_pytorch_raises_on_a_second_backward_only_where_values_were_saved_and_zero_grad_sets_none():
    torch = pytest.importorskip("torch")
    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    total = w + 1.0 + w  # additions save nothing
    total.backward()
    total.backward()  # goes through
    assert w.grad.item() == 4.0
    optimizer = torch.optim.SGD([w], lr=0.1)
    optimizer.zero_grad()
    assert w.grad is None  # the default, set_to_none=True


def test_02_moons_are_the_two_moons_of_notebook_03_as_python_numbers():
    points, labels = nb02.moons(32, seed=0)
    ref_points, ref_labels = datasets.two_moons(32, noise=0.1, seed=0)
    assert isinstance(points[0][0], float) and isinstance(labels[0], float)
    np.testing.assert_array_equal(np.array(points), ref_points)
    assert labels == [1.0 if c == 0 else -1.0 for c in ref_labels]
    model = nb02.MLP([2, 8, 8, 1], seed=0)
    assert len(model.parameters()) == (2 * 8 + 8) + (8 * 8 + 8) + (8 + 1) == 105
    z = Value(-0.5)
    r = z.relu()
    r.backward()
    assert (r.data, z.grad) == (0.0, 0.0)
    z = Value(0.5)
    r = z.relu()
    r.backward()
    assert (r.data, z.grad) == (0.5, 1.0)
