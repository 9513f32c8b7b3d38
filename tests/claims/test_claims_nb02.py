"""The claims of notebook 02: each figure or causal claim the notebook states, asserted."""
import math

import numpy as np
import pytest

from haaw import Value
from haaw.course import datasets, nb02
from haaw.course.exercises.nb01 import mul_local, pow_local
from haaw.course.exercises.nb02 import add_local, backward, exp_local, tanh_local
from haaw.engine import autograd, plugins
from haaw.engine.forward_mode import Dual, forward_mode_gradient


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


@pytest.mark.upstream
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


def _smooth_step_loss(model, points, labels):
    """The notebook's loss, written again: the mean of 1/(1 + e^(label·score))."""
    return sum((1 + (y * model(p)).exp()) ** -1 for p, y in zip(points, labels)) * (1 / len(points))


def _train(steps=15, lr=1.0):
    points, labels = nb02.moons(32, seed=0)
    model = nb02.MLP([2, 8, 8, 1], seed=0)
    losses = []
    for _ in range(steps):
        loss = _smooth_step_loss(model, points, labels)
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
    assert engine[-1] < 0.4 * engine[0]  # it learns
    assert all(later < earlier for earlier, later in zip(engine, engine[1:]))  # "the loss falls step after step"
    with plugins.use(backward=backward):
        yours, _ = _train()
    assert max(abs(a - b) for a, b in zip(yours, engine)) <= 1e-12
    with plugins.use(backward=lambda root: backward(root, accumulate=False)):  # `=` for `+=`
        wrong, _ = _train(steps=3)
    assert max(abs(a - b) for a, b in zip(wrong, engine)) > 1e-3


def _counted(fn, calls):
    def run(*args):
        calls[fn.__name__] = calls.get(fn.__name__, 0) + 1
        return fn(*args)
    run.__name__ = fn.__name__
    return run


def test_02_the_network_and_its_loss_use_every_operation_of_the_learner_s_table_and_nothing_else():
    points, labels = nb02.moons(32, seed=0)
    model = nb02.MLP([2, 8, 8, 1], seed=0)
    ops = {node._op for node in autograd.topological_order(_smooth_step_loss(model, points, labels)) if node._op}
    assert ops == {"+", "*", "tanh", "exp", "**-1"}  # +, *, **, tanh, exp: the whole table, no - and no relu


def test_02_the_network_trains_on_all_of_the_learner_s_table_and_backward_as_on_the_engine():
    engine, _ = _train()
    calls = {}
    table = dict(add=add_local, mul=mul_local, pow=pow_local, scalar_tanh=tanh_local, exp=exp_local, backward=backward)
    with plugins.use(**{slot: _counted(fn, calls) for slot, fn in table.items()}):
        yours, _ = _train()
    assert set(calls) == {fn.__name__ for fn in table.values()}  # every function of the table really ran
    assert calls["backward"] == 15 and calls["exp_local"] == calls["pow_local"] == 15 * 32
    assert max(abs(a - b) for a, b in zip(yours, engine)) <= 1e-12
    # a planted bug in any one of them changes the run: the comparison can fail
    for slot, wrong in (("scalar_tanh", lambda a: (math.tanh(a), (1 - a * a,))),
                        ("exp", lambda a: (math.exp(a), (a * math.exp(a - 1),))),
                        ("add", lambda a, b: (a + b, (0.5, 0.5)))):
        with plugins.use(**{**table, slot: wrong}):
            off, _ = _train(steps=3)
        assert max(abs(a - b) for a, b in zip(off, engine)) > 1e-4, slot


def test_02_the_learner_s_add_tanh_and_exp_run_in_the_engine_s_place():
    seen = []
    with plugins.use(add=lambda a, b: (seen.append("+") or a + b, (1.0, 1.0)),
                     scalar_tanh=lambda a: (seen.append("tanh") or math.tanh(a), (1 - math.tanh(a) ** 2,)),
                     exp=lambda a: (seen.append("exp") or math.exp(a), (math.exp(a),))):
        x = Value(0.3)
        y = (x + 1.0).tanh().exp()
        y.backward()
    assert seen == ["+", "tanh", "exp"]
    t = math.tanh(1.3)
    assert y.data == pytest.approx(math.exp(t), rel=1e-15)
    assert x.grad == pytest.approx(math.exp(t) * (1 - t * t), rel=1e-12)
    with plugins.use(scalar_tanh=lambda a: (math.tanh(a), (1 - a * a,))):  # a wrong local derivative shows
        x = Value(0.3)
        x.tanh().backward()
    assert x.grad == pytest.approx(1 - 0.09) != pytest.approx(1 - math.tanh(0.3) ** 2)


def _through_gate(gate, a, b, upstream):
    a, b = Value(a), Value(b)
    (gate(a, b) * upstream).backward()
    return a.grad, b.grad


@pytest.mark.parametrize("a, b, upstream", [(3.0, -1.0, 2.0), (-0.5, 4.0, -1.5), (2.0, 7.0, 0.25)])
def test_02_add_distributes_multiply_swaps_max_routes(a, b, upstream):
    assert _through_gate(lambda p, q: p + q, a, b, upstream) == (upstream, upstream)  # unchanged, not split
    assert _through_gate(lambda p, q: p * q, a, b, upstream) == (upstream * b, upstream * a)  # the other input
    larger_first = (upstream, 0.0) if a > b else (0.0, upstream)
    assert _through_gate(lambda p, q: q + (p - q).relu(), a, b, upstream) == larger_first  # to the larger
    # oracles that share nothing with the engine: central differences of upstream·gate(a, b) ...
    h = 1e-6
    for gate in (lambda p, q: p + q, lambda p, q: p * q, max):
        fd = ((upstream * gate(a + h, b) - upstream * gate(a - h, b)) / (2 * h),
              (upstream * gate(a, b + h) - upstream * gate(a, b - h)) / (2 * h))
        ours = _through_gate({max: lambda p, q: q + (p - q).relu()}.get(gate, gate), a, b, upstream)
        assert ours == pytest.approx(fd, rel=1e-6, abs=1e-9)
    # ... and torch's own max
    torch = pytest.importorskip("torch")
    ta = torch.tensor(a, dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(b, dtype=torch.float64, requires_grad=True)
    (torch.maximum(ta, tb) * upstream).backward()
    assert (ta.grad.item(), tb.grad.item()) == larger_first


def _recurrence(weight, steps):
    h = 0.1
    for _ in range(steps):
        h = (weight * h + 0.5).tanh()
    return (h - 0.3) ** 2


@pytest.mark.parametrize("steps", [10, 100, 1000])
def test_02_reverse_mode_keeps_every_value_on_the_tape_four_per_step_forward_mode_keeps_none(steps):
    w = Value(0.7)
    loss = _recurrence(w, steps)
    assert len(autograd.topological_order(loss)) == 4 * steps + 5  # 0.5, w·h, + and tanh per step; w, 0.1, 0.3, -, **
    loss.backward()
    out = _recurrence(Dual(0.7, 1.0), steps)
    assert Dual.__slots__ == ("data", "tangent") and not hasattr(out, "_parents")  # nothing kept but two numbers
    assert out.tangent == pytest.approx(w.grad, rel=1e-12)
    def plain(weight):  # the same recurrence on plain floats, for central differences
        h = 0.1
        for _ in range(steps):
            h = math.tanh(weight * h + 0.5)
        return (h - 0.3) ** 2

    fd = (plain(0.7 + 1e-6) - plain(0.7 - 1e-6)) / 2e-6
    assert w.grad == pytest.approx(fd, rel=1e-5)


def test_02_one_jvp_is_the_gradient_s_dot_product_with_the_direction_one_vjp_is_the_whole_gradient():
    inputs = [0.5, -1.2, 0.3, 2.0, -0.7, 1.1, 0.0, -0.4]

    def neuron(*params):
        *weights, bias = params
        z = bias
        for wi, xi in zip(weights, inputs):
            z = z + wi * xi
        return (z.tanh() - 0.25) ** 2

    theta = [0.1 * (i - 4) for i in range(9)]
    v = [1.0, -0.5, 0.0, 2.0, 0.5, -1.0, 0.25, 1.5, -2.0]
    jvp = neuron(*[Dual(t, d) for t, d in zip(theta, v)]).tangent
    params = [Value(t) for t in theta]
    neuron(*params).backward()
    assert jvp == pytest.approx(sum(p.grad * d for p, d in zip(params, v)), rel=1e-12)
    h = 1e-6  # the directional derivative, by central differences along v, on plain floats
    step = lambda s: (math.tanh(sum((t + s * d) * x for t, d, x in zip(theta, v, inputs)) + theta[8] + s * v[8])  # noqa: E731
                      - 0.25) ** 2
    assert jvp == pytest.approx((step(h) - step(-h)) / (2 * h), rel=1e-6)
    torch = pytest.importorskip("torch")
    tt, tv = torch.tensor(theta, dtype=torch.float64), torch.tensor(v, dtype=torch.float64)
    x = torch.tensor(inputs, dtype=torch.float64)
    f = lambda p: (torch.tanh(p[:8] @ x + p[8]) - 0.25) ** 2  # noqa: E731
    _, torch_jvp = torch.func.jvp(f, (tt,), (tv,))
    _, pullback = torch.func.vjp(f, tt)
    (torch_grad,) = pullback(torch.tensor(1.0, dtype=torch.float64))
    assert torch_jvp.item() == pytest.approx(jvp, rel=1e-12)
    np.testing.assert_allclose(torch_grad.numpy(), [p.grad for p in params], rtol=1e-12)


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


@pytest.mark.upstream
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
    hidden = model.layers[0][0](points[0])
    assert hidden._op == "tanh" and model(points[0])._op == "+"  # tanh hidden units, a plain score out
    assert nb02.MLP([2, 3, 1], activation="relu").layers[0][0](points[0])._op == "relu"
    with pytest.raises(ValueError, match="activation"):
        nb02.MLP([2, 3, 1], activation="gelu")
    z = Value(-0.5)
    r = z.relu()
    r.backward()
    assert (r.data, z.grad) == (0.0, 0.0)
    z = Value(0.5)
    r = z.relu()
    r.backward()
    assert (r.data, z.grad) == (0.5, 1.0)


def test_02_at_a_tie_this_engine_s_max_sends_the_gradient_to_b():
    a, b = Value(1.0), Value(1.0)
    (b + (a - b).relu()).backward()
    assert (a.grad, b.grad) == (0.0, 1.0)


@pytest.mark.upstream
def test_02_at_a_tie_torch_maximum_splits_the_gradient():
    torch = pytest.importorskip("torch")
    ta, tb = torch.tensor(1.0, requires_grad=True), torch.tensor(1.0, requires_grad=True)
    (torch.maximum(ta, tb) * 2).backward()
    assert (ta.grad.item(), tb.grad.item()) == (1.0, 1.0)


def _charged(operation, *inputs):
    """The (forward, backward) FLOPs that count_flops charges for operation(*tensors), each input (shape, needs grad)."""
    from haaw import Tensor
    from haaw.tools.flops import count_flops

    rng = np.random.default_rng(0)
    tensors = [Tensor(rng.standard_normal(shape), requires_grad=needs) for shape, needs in inputs]
    with count_flops() as counter:
        out = operation(*tensors)
        out.backward(np.ones(out.shape))
    return counter.total_forward, counter.total_backward


def test_02_the_flop_counter_charges_an_entrywise_op_once_per_input_that_needs_a_gradient(stored_output):
    A, W = (4, 5), (5, 3)
    n = 4 * 5  # one FLOP per entry, forward
    assert _charged(lambda p, q: p * q, (A, True), (A, True)) == (n, 2 * n)  # a·b: twice its forward, not once
    assert _charged(lambda p, q: p * q, (A, True), (A, False)) == (n, n)
    assert _charged(lambda p, q: p + q, (A, True), (A, True)) == (n, 2 * n)  # though add's backward does no arithmetic
    assert _charged(lambda p, q: p / q, (A, True), (A, True)) == (n, 2 * n)  # though -g·a/b² takes more than one op
    assert _charged(lambda p: p.tanh(), (A, True)) == (n, n)
    assert _charged(lambda p: p.exp(), (A, True)) == (n, n)
    product = 2 * 4 * 5 * 3  # (4, 5) @ (5, 3): 5 multiplies and 5 adds per output entry
    assert _charged(lambda p, q: p @ q, (A, True), (W, True)) == (product, 2 * product)
    assert _charged(lambda p, q: p @ q, (A, False), (W, True)) == (product, product)  # the first layer: data needs none
    printed = stored_output("02", "def charged(")  # the companion's table says the same
    ratios = [float(line.rsplit(" ", 1)[1]) for line in printed.splitlines() if "backward/forward" in line]
    assert ratios == [2, 1, 2, 2, 1, 1, 2, 1]


# --- the companion's Hessian-vector product ------------------------------------------------------------------
INPUTS = (0.5, -1.2, 0.3, 2.0, -0.7, 1.1, 0.0, -0.4)
THETA = [0.1 * (i - 4) for i in range(9)]
DIRECTION = [1.0, -0.5, 0.0, 2.0, 0.5, -1.0, 0.25, 1.5, -2.0]


def _neuron(*params):
    *weights, bias = params
    z = bias
    for wi, xi in zip(weights, INPUTS):
        z = z + wi * xi
    return (z.tanh() - 0.25) ** 2


def _value_gradient(params):
    values = [Value(p) for p in params]
    _neuron(*values).backward()
    return [v.grad for v in values]


def test_02_forward_over_reverse_agrees_with_a_difference_of_gradients_and_with_double_backward():
    from haaw.course.exercises.nb02 import hvp
    from haaw.engine.forward_mode import gradient
    Hv = hvp(gradient(_neuron), THETA, DIRECTION)
    h = 1e-5
    plus = _value_gradient([t + h * v for t, v in zip(THETA, DIRECTION)])
    minus = _value_gradient([t - h * v for t, v in zip(THETA, DIRECTION)])
    by_difference = [(p - m) / (2 * h) for p, m in zip(plus, minus)]
    assert np.allclose(Hv, by_difference, rtol=1e-6, atol=1e-12)
    assert not np.allclose(Hv, by_difference, rtol=1e-12, atol=0)  # "about six digits": not to rounding
    torch = pytest.importorskip("torch")
    theta_t = torch.tensor(THETA, dtype=torch.float64, requires_grad=True)
    loss = (torch.tanh(theta_t[:8] @ torch.tensor(INPUTS, dtype=torch.float64) + theta_t[8]) - 0.25) ** 2
    (g,) = torch.autograd.grad(loss, theta_t, create_graph=True)
    (Hv_t,) = torch.autograd.grad(g @ torch.tensor(DIRECTION, dtype=torch.float64), theta_t)
    assert np.allclose(Hv, Hv_t.numpy(), rtol=1e-12, atol=1e-12)


def test_02_a_product_of_duals_is_three_products_of_floats_and_an_addition():
    p = Dual(2.0, 3.0) * Dual(5.0, 7.0)
    assert (p.data, p.tangent) == (2.0 * 5.0, 2.0 * 7.0 + 3.0 * 5.0)


def test_02_one_hessian_vector_product_is_one_forward_and_one_backward_pass(monkeypatch):
    from haaw.course.exercises.nb02 import hvp
    from haaw.engine.forward_mode import gradient
    calls = {"f": 0, "backward": 0}
    real = autograd.backward

    def counted_backward(*args, **kwargs):
        calls["backward"] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(autograd, "backward", counted_backward)

    def counted(*params):
        calls["f"] += 1
        return _neuron(*params)
    hvp(gradient(counted), THETA, DIRECTION)
    assert calls == {"f": 1, "backward": 1}
    for i in range(9):
        hvp(gradient(counted), THETA, [1.0 if j == i else 0.0 for j in range(9)])
    assert calls == {"f": 10, "backward": 10}


def test_02_the_step_one_over_the_curvature_along_the_gradient_lowers_the_loss_most():
    from haaw.course.exercises.nb02 import hvp
    from haaw.engine.forward_mode import gradient
    g = [d.data for d in gradient(_neuron)(*THETA)]
    Hg = hvp(gradient(_neuron), THETA, g)
    kappa = sum(a * b for a, b in zip(g, Hg)) / sum(a * a for a in g)
    assert kappa > 0 and round(kappa, 2) == 14.35

    def after(times):
        return _neuron(*[Value(t - times / kappa * a) for t, a in zip(THETA, g)]).data
    start = _neuron(*[Value(t) for t in THETA]).data
    assert 0.9e-3 < start < 1.1e-3 and after(1.0) < 1e-6               # from about 1e-3 to below 1e-6
    assert 0.2 < after(0.5) / start < 0.3                               # about three quarters removed
    assert 1.0 < after(2.0) / start < 1.3 and after(2.5) / start > 2    # a little above the start; more than double
    steps = np.linspace(0.05, 3.0, 60)
    assert abs(steps[np.argmin([after(s) for s in steps])] - 1.0) < 0.06  # the best step on a fine grid is 1/κ
