"""haaw.use: a learner's function runs in the engine's place inside the block, and nowhere else. (The attention
slot and softmax in a TransformerBlock, nn's: tests/nn/test_attention_slot.py.)"""
import math

import numpy as np
import pytest

import haaw
from haaw import Tensor, Value
from haaw.amp import DynamicLossScaler
from haaw.engine import plugins
from haaw.engine.tensor import apply
from haaw.optim import Adam

rng = np.random.default_rng(0)


# correct implementations, written here from the formulas (not the engine's code)
def mul(a, b):
    return a * b, (b, a)


def power(a, n):
    return a**n, (n * a ** (n - 1),)


def backward(root):
    order, seen = [], set()

    def visit(node):  # fine for the small graphs used here
        if id(node) not in seen:
            seen.add(id(node))
            for parent in node._parents:
                visit(parent)
            order.append(node)
    visit(root)
    root.grad = 1.0
    for node in reversed(order):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


def linear_backward(X, W, G):
    Xf, Gf = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, Xf.T @ Gf, Gf.sum(axis=0)


def unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


def tanh_backward(y, G):
    return G * (1 - y * y)


def relu_backward(y, G):
    return G * (y > 0)


def softmax_backward(s, G):
    return s * (G - (G * s).sum(axis=-1, keepdims=True))


def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g * g
    return p - lr * (m / (1 - beta1**t)) / (np.sqrt(v / (1 - beta2**t)) + eps), m, v


def update_scale(scale, good, found_inf, growth, backoff, interval):
    if found_inf:
        return scale * backoff, 0
    return (scale * growth, 0) if good + 1 == interval else (scale, good + 1)


def scalar_grads():
    w, x = Value(2.0), Value(3.0)
    L = (w * x) ** 2 + w * w
    L.backward()
    return L.data, w.grad, x.grad


def test_the_scalar_engine_runs_on_your_mul_pow_and_backward():
    expected = scalar_grads()
    with haaw.use(mul=mul, pow=power, backward=backward):
        assert scalar_grads() == expected
    assert Value.backward is not backward and scalar_grads() == expected


def mlp_grads():
    """A two-layer network written with the engine's operations: the linear operation, then a product and a bias
    added by broadcasting (unbroadcast sums its gradient back), tanh, relu and the cross-entropy rows."""
    rng_ = np.random.default_rng(0)
    params = [Tensor(rng_.standard_normal(shape), requires_grad=True) for shape in ((3, 5), (5,), (5, 4), (4,))]
    w1, b1, w2, b2 = params
    x = Tensor(np.random.default_rng(1).standard_normal((6, 3)))
    logits = (apply("linear", x, w1, b1).tanh() @ w2 + b2).relu()
    apply("cross_entropy_rows", logits, targets=np.array([0, 1, 2, 3, 0, 1])).mean().backward()
    return [p.grad for p in params]


def test_the_tensor_engine_runs_on_your_vjps_and_gives_the_same_gradients():
    yours = {"linear": linear_backward, "unbroadcast": unbroadcast, "tanh": tanh_backward, "relu": relu_backward}
    called = set()

    def counted(name):
        def run(*args):
            called.add(name)
            return yours[name](*args)
        return run

    expected = mlp_grads()
    with haaw.use(**{name: counted(name) for name in yours}):
        ours = mlp_grads()
    assert called == set(yours)  # each of your functions took part
    for a, b in zip(ours, expected):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_adam_and_the_loss_scaler_run_on_yours():
    def train(steps=5):
        p = Tensor(np.array([1.0, -2.0]), requires_grad=True)
        opt, scaler = Adam([p], lr=0.1), DynamicLossScaler(init_scale=8.0, growth_interval=2)
        for i in range(steps):
            p.grad = np.array([0.5, float(i)])
            opt.step()
            scaler.update(found_inf=i == 3)
        return p.data.copy(), scaler.scale
    expected = train()
    with haaw.use(adam=adam_step, loss_scale=update_scale):
        ours = train()
    np.testing.assert_allclose(ours[0], expected[0], rtol=1e-12)
    assert ours[1] == expected[1] == 8.0  # 8 → 16 after two clean steps, 8 again at the overflow


def test_outside_the_block_the_engine_s_own_code_is_back():
    with haaw.use(tanh=lambda y, G: G * 0.0):
        t = Tensor(np.array([0.3]), requires_grad=True)
        t.tanh().sum().backward()
        assert t.grad[0] == 0.0
    t = Tensor(np.array([0.3]), requires_grad=True)
    t.tanh().sum().backward()
    assert t.grad[0] == pytest.approx(1 - np.tanh(0.3) ** 2)
    assert plugins.in_use() == {}


def test_the_engine_still_refuses_a_wrong_shaped_gradient_from_your_code():
    x = Tensor(rng.standard_normal((4, 3)))
    w, b = Tensor(rng.standard_normal((3, 2)), requires_grad=True), Tensor(np.zeros(2), requires_grad=True)
    with haaw.use(linear=lambda X, W, G: (G @ W.T, G.T @ X, G.sum(axis=0))):  # dW transposed
        with pytest.raises(ValueError, match=r"backward of 'linear' returned a gradient of shape \(2, 3\) for its input 1"):
            apply("linear", x, w, b).sum().backward()


@pytest.mark.parametrize("kwargs, message", [
    ({"matmul": linear_backward}, "no slot called 'matmul'. The slots are: adam"),
    ({"tanh": ...}, r"use\(tanh=...\) needs a function"),
    ({"tanh": 3}, "got int 3"),
])
def test_use_names_a_wrong_slot_or_a_non_function(kwargs, message):
    with pytest.raises(TypeError, match=message):
        with haaw.use(**kwargs):
            pass
    assert plugins.in_use() == {}


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_your_softmax_backward_written_for_the_last_axis_serves_a_softmax_along_any_axis(dim):
    z, g = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 4, 5))
    t = Tensor(z, requires_grad=True)
    with haaw.use(softmax=softmax_backward):
        t.softmax(dim).backward(g)
    s = np.exp(z) / np.exp(z).sum(axis=dim, keepdims=True)
    np.testing.assert_allclose(t.grad, s * (g - (g * s).sum(axis=dim, keepdims=True)), rtol=1e-12, atol=1e-15)


def _tanh_grad_elsewhere(run):
    """dL/dx of tanh at 0.3, computed by ``run`` (another thread, or an empty context)."""
    found = []

    def compute():
        t = Tensor(np.array([0.3]), requires_grad=True)
        t.tanh().sum().backward()
        found.append(t.grad[0])
    run(compute)
    return found[0]


def test_a_block_open_in_one_context_reaches_no_code_running_in_another():
    """An explorer's callback can run while a cell is inside ``use(...)`` or ``no_grad()``: it runs in another
    context (ipykernel handles a widget's message in a task or thread of its own) and must see neither."""
    import contextvars
    import threading

    from haaw import no_grad

    def in_thread(fn):
        worker = threading.Thread(target=fn)
        worker.start()
        worker.join()

    own = 1 - np.tanh(0.3) ** 2
    with haaw.use(tanh=lambda y, G: G * 0.0), no_grad():
        assert plugins.in_use() != {}
        for run in (in_thread, lambda fn: contextvars.Context().run(fn)):
            assert _tanh_grad_elsewhere(run) == pytest.approx(own)
    assert plugins.in_use() == {}


def test_an_instrument_active_in_one_context_counts_no_work_done_in_another():
    import threading

    from haaw.tools.flops import count_flops

    x = Tensor(np.ones((4, 4)))
    with count_flops() as counter:
        worker = threading.Thread(target=lambda: x @ x)  # an explorer's callback, say
        worker.start()
        worker.join()
        assert counter.total_forward == 0
        x @ x
        assert counter.total_forward == 2 * 4 * 4 * 4


@pytest.mark.parametrize("first_out", [0, 1], ids=["first-in-leaves-first", "last-in-leaves-first"])
def test_a_function_decorated_with_no_grad_runs_in_two_threads_at_once(first_out):
    """Thread 0 enters the function and waits there for thread 1 to come in (an event thread 1 sets from inside),
    so the two calls overlap for certain; then one leaves while the other stays. Each sees no_grad inside, the one
    still inside keeps it after the other left, and each has grad mode back outside. A flag shared by the process
    fails in both orders; one token stack shared by the calls fails when the first in leaves first. Every wait has
    a timeout: a call that never meets the other fails instead of hanging."""
    import threading

    from haaw import no_grad
    from haaw.engine.modes import grad_enabled

    inside, left = [threading.Event(), threading.Event()], threading.Event()
    seen, errors, x = [{}, {}], [], Tensor(np.ones(2), requires_grad=True)

    @no_grad
    def work(me):
        seen[me]["grad inside"] = grad_enabled()
        inside[me].set()
        seen[me]["met the other inside"] = inside[1 - me].wait(timeout=10)
        if me != first_out:
            seen[me]["saw the other leave"] = left.wait(timeout=10)
            seen[me]["grad inside after the other left"] = grad_enabled()
        return x * 2

    def run(me):
        try:
            if me == 1:
                inside[0].wait(timeout=10)  # thread 0 is in first
            seen[me]["recorded"] = work(me).requires_grad
            seen[me]["grad outside"] = grad_enabled()
        except Exception as err:  # noqa: BLE001
            errors.append(err)
        finally:
            if me == first_out:
                left.set()

    threads = [threading.Thread(target=run, args=(me,), daemon=True) for me in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "a thread is still inside the function after 30 s"
    assert errors == []
    for me in (0, 1):
        expected = {"grad inside": False, "met the other inside": True, "recorded": False, "grad outside": True}
        if me != first_out:
            expected |= {"saw the other leave": True, "grad inside after the other left": False}
        assert seen[me] == expected, f"thread {me}"
    assert grad_enabled() and (x * 2).requires_grad


@pytest.mark.parametrize("slot, fn, call", [
    ("mul", lambda a, b: (a * b, (b,)), lambda: Value(2.0) * Value(3.0)),
    ("add", lambda a, b: (a + b, (1.0, 1.0, 1.0)), lambda: Value(2.0) + Value(3.0)),
    ("pow", lambda a, n: (a**n, ()), lambda: Value(2.0) ** 3),
    ("scalar_tanh", lambda a: (math.tanh(a), (1.0, 0.0)), lambda: Value(0.5).tanh()),
    ("exp", lambda a: (math.exp(a), 5.0), lambda: Value(0.5).exp()),
])
def test_local_derivatives_of_the_wrong_length_are_refused_by_name(slot, fn, call):
    """One local derivative per input: (b,) for a·b would lose a's gradient without a word."""
    with haaw.use(**{slot: fn}):
        with pytest.raises((ValueError, TypeError), match=f"your function in the engine's '{slot}' slot returned"):
            call()


# --- one rule for every slot: the function in use when the forward pass ran is the one its backward calls -------
def _zeros(*arrays):
    return tuple(np.zeros_like(a) for a in arrays)


def _scalar_graph(build):
    """A (forward, backward) pair for the scalar engine, whose local derivatives are numbers kept at the forward."""
    return build, lambda out: out.backward()


def _tensor_graph(build):
    """A (forward, backward) pair: the graph is built by the first, run backward by the second."""
    def forward():
        x = Tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
        return build(x)

    return forward, lambda out: out.sum().backward()


def _attention(x):
    q = x.reshape(1, 2, 3)
    return haaw.nn.functional.scaled_dot_product_attention(q, q * 1.0, q * 2.0)


# slot -> (a stand-in for your function, whose calls are counted; the forward pass; the backward pass). The
# stand-ins give zeros or the right answer: only whether they are called matters here.
RULE = {
    "add": (lambda a, b: (a + b, (1.0, 1.0)), *_scalar_graph(lambda: Value(0.5) + Value(1.5))),
    "mul": (mul, *_scalar_graph(lambda: Value(0.5) * Value(1.5))),
    "pow": (power, *_scalar_graph(lambda: Value(0.5) ** 3)),
    "scalar_tanh": (lambda a: (math.tanh(a), (1 - math.tanh(a) ** 2,)), *_scalar_graph(lambda: Value(0.5).tanh())),
    "exp": (lambda a: (math.exp(a), (math.exp(a),)), *_scalar_graph(lambda: Value(0.5).exp())),
    "linear": (lambda X, W, G: (*_zeros(X, W), np.zeros(W.shape[1])),
               *_tensor_graph(lambda x: apply("linear", x, Tensor(np.ones((3, 4)), requires_grad=True),
                                              Tensor(np.zeros(4), requires_grad=True)))),
    "unbroadcast": (unbroadcast, *_tensor_graph(lambda x: x + Tensor(np.ones(3), requires_grad=True))),
    "tanh": (lambda y, G: np.zeros_like(y), *_tensor_graph(lambda x: x.tanh())),
    "relu": (lambda y, G: np.zeros_like(y), *_tensor_graph(lambda x: x.relu())),
    "softmax": (lambda s, G: np.zeros_like(s), *_tensor_graph(lambda x: x.softmax(dim=-1))),
    "cross_entropy": (lambda logits, t: (0.0, np.zeros_like(logits)),
                      *_tensor_graph(lambda x: haaw.nn.functional.cross_entropy(x, np.array([0, 2])))),
    "layer_norm": (lambda x, w, G, eps: (*_zeros(x, w), np.zeros_like(w)),
                   *_tensor_graph(lambda x: haaw.nn.LayerNorm(3)(x))),
    "attention": (lambda Q, K, V, mask, G: _zeros(Q, K, V), *_tensor_graph(_attention)),
}
# Slots that are not part of an operation: the call itself is their forward pass, so they are in use when called.
CALLED = {
    "backward": (backward, lambda: None, lambda _: (Value(2.0) * Value(3.0)).backward()),
    "adam": (adam_step, lambda: None, lambda _: _adam_once()),
    "loss_scale": (update_scale, lambda: None, lambda _: DynamicLossScaler(8.0, growth_interval=1).update(False)),
}


def _adam_once():
    p = Tensor(np.ones(2), requires_grad=True)
    p.grad = np.ones(2)
    Adam([p], lr=0.1).step()


def test_every_slot_is_in_the_table_of_the_one_rule():
    assert set(RULE) | set(CALLED) == set(plugins.SLOTS)


@pytest.mark.parametrize("direction", ["forward inside, backward after", "forward before, backward inside"])
@pytest.mark.parametrize("slot", sorted(RULE))
def test_the_function_in_use_at_the_forward_pass_is_the_one_its_backward_calls(slot, direction):
    """Table operations looked your function up when backward ran, layer_norm and attention when the forward ran:
    a graph built inside use() and run backward outside did not call yours for tanh, and did for layer_norm."""
    yours, forward, backward_ = RULE[slot]
    calls = []

    def counted(*args):
        calls.append(slot)
        return yours(*args)

    if direction == "forward inside, backward after":
        with haaw.use(**{slot: counted}):
            out = forward()
        calls_in_forward = len(calls)
        backward_(out)
        assert len(calls) > calls_in_forward or slot in ("add", "mul", "pow", "scalar_tanh", "exp"), \
            f"'{slot}': the graph built inside use() did not call yours in its backward"
        assert calls, f"'{slot}': yours was never called"
    else:
        out = forward()
        with haaw.use(**{slot: counted}):
            backward_(out)
        assert not calls, f"'{slot}': the graph built outside use() called yours in its backward"


@pytest.mark.parametrize("slot", sorted(CALLED))
def test_a_slot_that_is_not_an_operation_is_in_use_when_it_is_called(slot):
    yours, _, call = CALLED[slot]
    calls = []

    def counted(*args):
        calls.append(slot)
        return yours(*args)

    with haaw.use(**{slot: counted}):
        call(None)
    assert calls
    calls.clear()
    call(None)
    assert not calls


# --- the guard around your function: read-only inputs, refusals, and a name that is yours ------------------------
def doubles_G_in_place(y, G):
    G *= 2  # the mistake: G belongs to the engine, which may still need it
    return G * (1 - y * y)


def _tanh_backward_once():
    x = Tensor(np.array([0.5, -1.0]), requires_grad=True)
    x.tanh().sum().backward()
    return x


def test_your_function_changing_an_input_in_place_is_refused_with_its_name_and_slot():
    with haaw.use(tanh=doubles_G_in_place):
        with pytest.raises(RuntimeError) as err:
            _tanh_backward_once()
    said = str(err.value)
    assert said.startswith("your doubles_G_in_place (in the engine's 'tanh' slot) changed one of its inputs in place")
    assert "the engine hands it its own arrays, which other operations still need. Make a new array (G = G * ...)" in said
    assert isinstance(err.value.__cause__, ValueError)


def test_a_function_without_a_name_is_named_by_its_slot_when_it_changes_an_input():
    import functools

    nameless = functools.partial(doubles_G_in_place)  # a partial has no __name__
    with haaw.use(tanh=nameless):
        with pytest.raises(RuntimeError, match=r"^your tanh \(in the engine's 'tanh' slot\) changed one"):
            _tanh_backward_once()


def test_an_error_of_your_own_reaches_you_unchanged():
    def raises(y, G):
        raise ValueError("my own mistake")

    with haaw.use(tanh=raises):
        with pytest.raises(ValueError, match="^my own mistake$"):
            _tanh_backward_once()


def test_an_array_handed_over_by_keyword_is_read_only_too():
    seen = []

    def adds_in_place(g, shape):
        seen.append(g.copy())
        g += 1
        return g

    with haaw.use(unbroadcast=adds_in_place):
        given = np.ones(3)
        with pytest.raises(RuntimeError, match="changed one of its inputs in place"):
            plugins.override("unbroadcast")(g=given, shape=(3,))
    assert seen and (seen[0] == 1).all() and (given == 1).all()


def test_what_the_engine_calls_presents_itself_as_your_function():
    import functools
    import inspect

    def my_unbroadcast(g, shape):
        return unbroadcast(g, shape)

    with haaw.use(unbroadcast=my_unbroadcast):
        called = plugins.override("unbroadcast")
        assert called.__name__ == "my_unbroadcast" and inspect.unwrap(called) is my_unbroadcast
    nameless = functools.partial(my_unbroadcast)
    with haaw.use(unbroadcast=nameless):
        called = plugins.override("unbroadcast")
        assert called.__name__ == "unbroadcast" and inspect.unwrap(called) is nameless
        assert (called(np.ones((2, 3)), (3,)) == 2).all()


def test_read_only_gives_a_view_or_a_copy_that_cannot_be_written():
    a = np.arange(3.0)
    view, copy = plugins.read_only(a), plugins.read_only(a, copy=True)
    for r in (view, copy):
        with pytest.raises(ValueError, match="read-only"):
            r[0] = 9.0
    a[1] = 7.0  # the array itself stays writable
    assert view[1] == 7.0 and copy[1] == 1.0  # a view sees the change, a copy does not
    assert plugins.read_only(3) == 3 and plugins.read_only("x") == "x"


@pytest.mark.parametrize("kind", [list, tuple])
def test_read_only_reaches_the_arrays_inside_a_list_or_tuple(kind):
    a, b = np.zeros(2), np.ones(2)
    views, copies = plugins.read_only(kind([a, b, 5])), plugins.read_only(kind([a, b, 5]), copy=True)
    assert type(views) is kind and type(copies) is kind and views[2] == 5 == copies[2]
    for r in (*views[:2], *copies[:2]):
        with pytest.raises(ValueError, match="read-only"):
            r[0] = 9.0
    a[0], b[0] = 3.0, 4.0
    assert (views[0][0], views[1][0]) == (3.0, 4.0) and (copies[0][0], copies[1][0]) == (0.0, 1.0)


def test_a_slot_declared_at_run_time_adapts_your_function_and_refuses_what_it_replaces():
    from haaw.engine import ops
    from haaw.engine.guard import ShortcutRefused

    plugins.slot("demo", "demo(x) -> x + 1", lambda fn: lambda x: fn(x) * 10, refuses=("ops.unbroadcast",))
    try:
        assert plugins.SLOTS["demo"] == plugins.Slot("demo", "demo(x) -> x + 1", plugins.SLOTS["demo"].adapter,
                                                     ("ops.unbroadcast",))
        with haaw.use(demo=lambda x: x + 1):
            assert plugins.override("demo")(2) == 30  # the adapter's form of yours
        with haaw.use(demo=lambda x: ops.unbroadcast(np.ones((2, 1)), (1,))):
            with pytest.raises(ShortcutRefused):
                plugins.override("demo")(2)
        with pytest.raises(TypeError, match=r"demo: demo\(x\) -> x \+ 1"):
            with haaw.use(nonesuch=lambda x: x):
                pass
        with pytest.raises(TypeError, match=r"use\(demo=...\) needs a function \(demo\(x\) -> x \+ 1\)"):
            with haaw.use(demo=1):
                pass
    finally:
        del plugins.SLOTS["demo"]
    assert "demo" not in plugins.SLOTS


def test_every_unknown_slot_is_named_and_every_slot_listed_with_what_it_takes():
    with pytest.raises(TypeError) as err:
        with haaw.use(nosuch=mul, other=mul):
            pass
    said = str(err.value)
    assert said.startswith("use(): no slot called 'nosuch', 'other'. The slots are: adam: adam_step(")
    assert "; add: add(a, b) -> (a+b, (d/da, d/db)) on numbers: the scalar engine's +; attention: " in said
    assert said.count("; ") >= len(plugins.SLOTS) - 1


def test_the_backward_of_a_graph_built_inside_use_sees_the_slots_as_they_were_at_its_forward_pass():
    """in_use() (what the course's checkers read) inside your backward, run after the block: yours is there."""
    seen = []

    def tanh_backward_looking(y, G):
        seen.append({name: getattr(fn, "__wrapped__", fn) for name, fn in plugins.in_use().items()})
        return G * (1 - y * y)

    with haaw.use(tanh=tanh_backward_looking):
        x = Tensor(np.array([0.5, -1.0]), requires_grad=True)
        y = x.tanh()
    assert plugins.in_use() == {}
    y.sum().backward()
    assert seen == [{"tanh": tanh_backward_looking}] and plugins.in_use() == {}
    np.testing.assert_allclose(x.grad, 1 - np.tanh([0.5, -1.0]) ** 2, rtol=1e-12)
