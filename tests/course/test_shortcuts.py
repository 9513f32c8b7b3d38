"""Calling the engine's (or the course's, or PyTorch's) own version of what an exercise asks for is not writing it.

Each shortcut below is written as a learner would write it, and computes the right numbers. ``check`` refuses it
with one message that names what was called and the learner's line, and does not count it as passed; plugged into
the engine's slot with ``haaw.use``, the same shortcut stops with that message instead of calling itself until
Python's recursion limit. The refusal is by identity (an alias is refused too), held in a context variable (another
thread, and the same code outside a check, run as ever), and never replaces a module's attribute.
"""
import threading

import numpy as np
import pytest

import haaw
import haaw.nn.functional as F
from haaw import Tensor, Value
from haaw.amp import DynamicLossScaler, StaticLossScaler
from haaw.course.exercises import check, passed
from haaw.course.exercises.core import WRONG
from haaw.engine import guard
from haaw.engine.function import Checkpoint
from haaw.nn.utils import clip_grad_norm_
from haaw.optim import Adam


# --- the shortcuts, as learners write them ------------------------------------------------------------------------
def linear_backward(X, W, G):
    x, w = Tensor(X, requires_grad=True), Tensor(W, requires_grad=True)
    b = Tensor(np.zeros(W.shape[1], dtype=W.dtype), requires_grad=True)
    F.linear(x, w, b).backward(G)
    return x.grad, w.grad, b.grad


def cross_entropy_forward_backward(logits, targets):
    z = Tensor(logits, requires_grad=True)
    shifted = z - Tensor(logits.max(axis=1, keepdims=True))
    log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
    loss = -log_probs[np.arange(len(targets)), targets].mean()
    loss.backward()
    return loss.item(), z.grad


def tanh_backward(y, G):
    x = Tensor(np.arctanh(y), requires_grad=True)
    x.tanh().backward(G)
    return x.grad


def relu_backward(y, G):
    x = Tensor(y, requires_grad=True)
    x.relu().backward(G)
    return x.grad


def softmax_backward(s, G):
    z = Tensor(np.log(s), requires_grad=True)
    z.softmax(dim=-1).backward(G)
    return z.grad


def attention_backward(Q, K, V, mask, G):
    q, k, v = (Tensor(a, requires_grad=True) for a in (Q, K, V))
    F.scaled_dot_product_attention(q, k, v, attn_mask=mask).backward(G)
    return q.grad, k.grad, v.grad


def layer_norm_backward(x, weight, G, eps):
    xt, w = Tensor(x, requires_grad=True), Tensor(weight, requires_grad=True)
    b = Tensor(np.zeros_like(weight), requires_grad=True)
    F.layer_norm(xt, (x.shape[-1],), w, b, eps).backward(G)
    return xt.grad, w.grad, b.grad


def backward_with_the_engine_s_sort(root):
    from haaw.engine.autograd import topological_order as order_of  # the name notebook 02's first cell imports

    nodes = order_of(root)
    for node in nodes:
        node.grad = 0.0
    root.grad = 1.0
    for node in reversed(nodes):
        for parent, local in zip(node._parents, node._local):
            parent.grad += node.grad * local


class CheckpointSegment(Checkpoint):
    """The engine's checkpoint under the asked-for name."""


def update_scale(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    scaler = DynamicLossScaler(scale, growth_factor, backoff_factor, growth_interval)
    scaler.clean_steps = good_steps
    scaler.update(found_inf)
    return scaler.scale, scaler.clean_steps


def unscale_and_clip(grads, scale, max_norm):
    unscaled, found_inf = StaticLossScaler(scale).unscale(grads)
    if found_inf:
        return unscaled, float("inf"), True
    params = [Tensor(np.zeros_like(g)) for g in unscaled]
    for p, g in zip(params, unscaled):
        p.grad = g
    norm = clip_grad_norm_(params, max_norm)
    return [p.grad for p in params], norm, False


def adam_step(p, g, m, v, t, lr, beta1, beta2, eps):
    param = Tensor(p.copy(), requires_grad=True)
    optimizer = Adam([param], lr=lr, betas=(beta1, beta2), eps=eps)
    optimizer.m[0][...], optimizer.v[0][...], optimizer.steps[0] = m, v, t - 1
    param.grad = g
    optimizer.step()
    return param.data, optimizer.m[0], optimizer.v[0]


def unbroadcast_by_alias(g, shape):
    from haaw.engine.ops import unbroadcast as ub

    return ub(g, shape)


SHORTCUTS = [
    ("03-linear-backward", linear_backward, "the engine's backward"),
    ("03-cross-entropy", cross_entropy_forward_backward, "the engine's backward"),
    ("04-tanh-backward", tanh_backward, "the engine's backward"),
    ("04-relu-backward", relu_backward, "the engine's backward"),
    ("05-softmax-backward", softmax_backward, "the engine's backward"),
    ("05-attention-backward", attention_backward, "the engine's backward"),
    ("05-layer-norm-backward", layer_norm_backward, "the engine's backward"),
    ("02-backward", backward_with_the_engine_s_sort, "the engine's topological_order"),
    ("06-checkpoint", CheckpointSegment, "the engine's Checkpoint"),
    ("07-update-scale", update_scale, "the engine's DynamicLossScaler.update"),
    ("07-unscale-then-clip", unscale_and_clip, "the engine's loss scaler's unscale"),
    ("10-adam-step", adam_step, "the engine's Adam"),
    ("03-unbroadcast", unbroadcast_by_alias, "the engine's unbroadcast"),
]


@pytest.mark.parametrize("key, fn, called", SHORTCUTS, ids=[s[0] for s in SHORTCUTS])
def test_a_shortcut_is_refused_by_name_and_not_counted(key, fn, called, tmp_path, monkeypatch):
    from haaw.course.exercises.progress import load

    monkeypatch.setenv("HAAW_PROGRESS", str(tmp_path / "haaw-progress.json"))
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    assert f"is not its own work: it calls {called}" in feedback.message, feedback.message
    assert "Calling it is not writing it" in feedback.message
    assert not passed(key, fn)
    kept = load()[key]  # an attempt, written down as one, never as solved; and no source kept to hand back
    assert (kept["solved"], kept["last"], "source" in kept) == (False, WRONG, False)


def test_pytorch_s_autograd_is_refused_too():
    torch = pytest.importorskip("torch")

    def tanh_backward_by_torch(y, G):
        x = torch.tensor(np.arctanh(y), requires_grad=True)
        torch.tanh(x).backward(torch.tensor(G))
        return x.grad.numpy()

    feedback = check("04-tanh-backward", tanh_backward_by_torch)
    assert feedback.status == WRONG and "it calls PyTorch's autograd" in feedback.message, feedback.message
    assert "torch.tanh(x).backward(torch.tensor(G))" in feedback.message  # the learner's line
    x = torch.ones(2, requires_grad=True)
    (x * 3).sum().backward()  # outside the check, PyTorch's gradients are on as before
    assert x.grad.tolist() == [3.0, 3.0]


# --- PyTorch's own versions: its function transforms, its autograd with gradients forced on, its optimizers,
# clip_grad_norm_ and the GradScaler's kernels, each written as a learner writes it and right where it runs ---------
def softmax_backward_by_torch_func(s, G):
    torch = pytest.importorskip("torch")
    _, pull_back = torch.func.vjp(lambda z: torch.softmax(z, dim=-1), torch.log(torch.tensor(s)))
    return pull_back(torch.tensor(G))[0].numpy()


def softmax_backward_by_autograd_functional(s, G):
    torch = pytest.importorskip("torch")
    z = torch.log(torch.tensor(s))
    return torch.autograd.functional.vjp(lambda z: torch.softmax(z, dim=-1), z, torch.tensor(G))[1].numpy()


def tanh_backward_by_torch_func_grad(y, G):
    torch = pytest.importorskip("torch")
    upstream = torch.tensor(G)
    return torch.func.grad(lambda x: (torch.tanh(x) * upstream).sum())(torch.tensor(np.arctanh(y))).numpy()


def tanh_backward_with_gradients_switched_back_on(y, G):
    torch = pytest.importorskip("torch")
    with torch.enable_grad():
        x = torch.tensor(np.arctanh(y), requires_grad=True)
        torch.tanh(x).backward(torch.tensor(G))
    return x.grad.numpy()


def adam_step_by_torch_optim(p, g, m, v, t, lr, beta1, beta2, eps):
    torch = pytest.importorskip("torch")
    param = torch.tensor(p, requires_grad=True)
    optimizer = torch.optim.Adam([param], lr=lr, betas=(beta1, beta2), eps=eps)
    param.grad = torch.tensor(g)
    optimizer.state[param] = {"step": torch.tensor(float(t - 1)), "exp_avg": torch.tensor(m),
                              "exp_avg_sq": torch.tensor(v)}
    optimizer.step()
    state = optimizer.state[param]
    return param.detach().numpy(), state["exp_avg"].numpy(), state["exp_avg_sq"].numpy()


def clip_grad_norm_by_torch(grads, max_norm):
    torch = pytest.importorskip("torch")
    params = [torch.zeros(g.shape, dtype=torch.float64 if g.dtype == np.float64 else torch.float32) for g in grads]
    for p, g in zip(params, grads):
        p.grad = torch.tensor(g)
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad.numpy() for p in params], float(norm)


def unscale_and_clip_by_torch(grads, scale, max_norm):
    return (*clip_grad_norm_by_torch([g / scale for g in grads], max_norm), False)


def update_scale_by_torch_kernel(scale, good_steps, found_inf, growth_factor, backoff_factor, growth_interval):
    torch = pytest.importorskip("torch")
    s, n = torch.tensor([float(scale)]), torch.tensor([int(good_steps)], dtype=torch.int32)
    torch._amp_update_scale_(s, n, torch.tensor([float(found_inf)]), growth_factor,
                             backoff_factor, growth_interval)
    return s.item(), int(n.item())


# torch.func's first use sets up its transforms, and torch.optim's first step imports torch._dynamo: 2 to 3 s each,
# so the tests that call them are in the slow tier (docs/testing.md), the others in the everyday loop
SETS_UP = pytest.mark.slow


def _shortcut(key, fn, called, args, sets_up=False):
    return pytest.param(key, fn, called, args, id=f"{key}-{fn.__name__}", marks=[SETS_UP] if sets_up else [])


TORCH_SHORTCUTS = [
    _shortcut("05-softmax-backward", softmax_backward_by_torch_func, "PyTorch's function transforms",
              (np.array([0.2, 0.3, 0.5]), np.array([1.0, 0.0, 2.0])), sets_up=True),
    _shortcut("05-softmax-backward", softmax_backward_by_autograd_functional, "PyTorch's autograd",
              (np.array([0.2, 0.3, 0.5]), np.array([1.0, 0.0, 2.0]))),
    _shortcut("04-tanh-backward", tanh_backward_by_torch_func_grad, "PyTorch's function transforms",
              (np.tanh(np.array([0.5, -1.0])), np.array([1.0, 2.0])), sets_up=True),
    _shortcut("04-tanh-backward", tanh_backward_with_gradients_switched_back_on, "PyTorch's autograd",
              (np.tanh(np.array([0.5, -1.0])), np.array([1.0, 2.0]))),
    _shortcut("10-adam-step", adam_step_by_torch_optim, "PyTorch's optimizers",
              (np.array([1.0, -2.0]), np.array([0.5, 0.25]), np.array([0.1, 0.0]), np.array([0.01, 0.02]), 3, 0.1,
               0.9, 0.999, 1e-8), sets_up=True),
    _shortcut("04-clip-grad-norm", clip_grad_norm_by_torch, "PyTorch's clip_grad_norm_", ([np.array([3.0, 4.0])], 1.0)),
    _shortcut("07-unscale-then-clip", unscale_and_clip_by_torch, "PyTorch's clip_grad_norm_",
              ([np.array([3.0, 4.0])], 2.0, 1.0)),
    _shortcut("07-update-scale", update_scale_by_torch_kernel, "PyTorch's GradScaler", (1024.0, 1, False, 2.0, 0.5, 2)),
]


@pytest.mark.parametrize("key, fn, called, args", TORCH_SHORTCUTS)
def test_pytorch_s_own_version_is_refused_by_name(key, fn, called, args):
    """Each computes the right numbers when it runs outside a check (the reference says so), and check refuses it,
    naming what it called."""

    from haaw.course.exercises import REGISTRY
    from haaw.course.exercises.code import _as_outputs

    ex = REGISTRY[key]
    right = guard.unguarded(ex.reference)(*args)
    theirs = fn(*args)
    if key != "07-update-scale":
        for a, b in zip(_as_outputs(theirs, ex.outputs, len(ex.outputs))[:2],
                        _as_outputs(right, ex.outputs, len(ex.outputs))[:2]):
            assert np.allclose(a if a.shape == b.shape else np.concatenate([np.ravel(x) for x in theirs[0]]),
                               b if a.shape == b.shape else np.concatenate([np.ravel(x) for x in right[0]]),
                               rtol=1e-5)
    else:
        assert tuple(theirs) == tuple(right)
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    assert f"is not its own work: it calls {called}" in feedback.message, feedback.message
    assert not passed(key, fn)


@SETS_UP
def test_torch_s_own_versions_in_the_engine_s_slot_stop_with_the_message():
    pytest.importorskip("torch")
    with pytest.raises(guard.ShortcutRefused, match="it calls PyTorch's function transforms"):
        with haaw.use(tanh=tanh_backward_by_torch_func_grad):
            _tanh()
    with pytest.raises(guard.ShortcutRefused, match="it calls PyTorch's optimizers"):
        with haaw.use(adam=adam_step_by_torch_optim):
            _adam()


@SETS_UP
def test_another_thread_s_torch_is_untouched_while_a_check_refuses_it():
    """The mode that refuses PyTorch's versions is the checking thread's alone, as PyTorch's no_grad is."""
    torch = pytest.importorskip("torch")
    inside, done, seen = threading.Event(), threading.Event(), []

    def tanh_backward_that_waits(y, G):
        inside.set()
        done.wait(5)
        return G * (1 - y * y)

    def other_thread():
        inside.wait(5)
        try:
            seen.append(torch.func.grad(lambda x: (x * x).sum())(torch.ones(2)).tolist())
            p = torch.zeros(1, requires_grad=True)
            p.grad = torch.ones(1)
            torch.optim.SGD([p], lr=0.5).step()
            seen.append(p.tolist())
        finally:
            done.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    check("04-tanh-backward", tanh_backward_that_waits)
    worker.join(10)
    assert seen == [[2.0, 2.0], [-0.5]]


def test_torch_used_for_the_arithmetic_alone_passes():
    """Refusing PyTorch's versions refuses no tensor arithmetic: the rule written with torch's operations passes."""
    torch = pytest.importorskip("torch")

    def softmax_backward(s, G):
        s, G = torch.tensor(s), torch.tensor(G)
        with torch.no_grad():  # allowed: it only switches gradients off
            return (s * (G - (G * s).sum(dim=-1, keepdim=True))).numpy()

    feedback = check("05-softmax-backward", softmax_backward)
    assert feedback.status == "correct", feedback.message


def test_the_course_s_own_reference_under_any_name_is_refused():
    from haaw.course.exercises.nb04 import tanh_backward as the_course_s

    assert check("04-tanh-backward", the_course_s).status == WRONG
    assert "it calls the course's own tanh_backward" in check("04-tanh-backward", lambda y, G: the_course_s(y, G)).message


# --- inside the engine: the message, never a RecursionError -------------------------------------------------------
def _linear():
    x, w, b = (Tensor(np.ones(s), requires_grad=True) for s in ((2, 3), (3, 4), (4,)))
    F.linear(x, w, b).sum().backward()


def _tanh():
    Tensor(np.linspace(-1, 1, 5), requires_grad=True).tanh().sum().backward()


def _relu():
    Tensor(np.linspace(-1, 1, 5), requires_grad=True).relu().sum().backward()


def _softmax():
    (Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True).softmax(dim=-1) * Tensor(np.eye(2, 3))).sum().backward()


def _attention():
    q = Tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    F.scaled_dot_product_attention(q, q, q).sum().backward()


def _layer_norm():
    x = Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
    (F.layer_norm(x, (4,), Tensor(np.ones(4), requires_grad=True), Tensor(np.zeros(4), requires_grad=True))
     * Tensor(np.arange(8.0).reshape(2, 4))).sum().backward()


def _cross_entropy():
    F.cross_entropy(Tensor(np.ones((2, 3)), requires_grad=True), np.array([0, 2])).backward()


def _scalar_backward():
    (Value(2.0) * Value(3.0)).backward()


def _loss_scale():
    DynamicLossScaler().update(False)


def _adam():
    p = Tensor(np.ones(2), requires_grad=True)
    p.grad = np.ones(2)
    Adam([p]).step()


def _unbroadcast():
    (Tensor(np.ones((2, 3)), requires_grad=True) + Tensor(np.ones(3), requires_grad=True)).sum().backward()


IN_THE_ENGINE = [
    ("linear", linear_backward, _linear, "the engine's backward"),
    ("tanh", tanh_backward, _tanh, "the engine's backward"),
    ("relu", relu_backward, _relu, "the engine's backward"),
    ("softmax", softmax_backward, _softmax, "the engine's backward"),
    ("attention", attention_backward, _attention, "the engine's backward"),
    ("layer_norm", layer_norm_backward, _layer_norm, "the engine's backward"),
    ("cross_entropy", cross_entropy_forward_backward, _cross_entropy, "the engine's backward"),
    ("backward", backward_with_the_engine_s_sort, _scalar_backward, "the engine's topological_order"),
    ("loss_scale", update_scale, _loss_scale, "the engine's DynamicLossScaler.update"),
    ("adam", adam_step, _adam, "the engine's Adam"),
    ("unbroadcast", unbroadcast_by_alias, _unbroadcast, "the engine's unbroadcast"),
]


@pytest.mark.parametrize("slot, fn, run, called", IN_THE_ENGINE, ids=[s[0] for s in IN_THE_ENGINE])
def test_a_shortcut_in_the_engine_s_slot_stops_with_the_message(slot, fn, run, called):
    with pytest.raises(guard.ShortcutRefused, match=f"it calls {called}"):
        with haaw.use(**{slot: fn}):
            run()
    run()  # and outside the block the engine runs its own code as before


# --- the refusal's reach ---------------------------------------------------------------------------------------------
def test_another_thread_is_not_refused_while_a_check_runs():
    """A check refuses in its own context only: an explorer's callback on another thread runs the engine's
    backward while a learner's function is being checked."""
    inside, done, seen = threading.Event(), threading.Event(), []

    def tanh_backward_that_waits(y, G):
        inside.set()
        done.wait(5)
        return G * (1 - y * y)

    def other_thread():
        inside.wait(5)
        try:
            x = Tensor(np.ones(3), requires_grad=True)
            (x * x).sum().backward()
            seen.append(x.grad.tolist())
        finally:
            done.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    check("04-tanh-backward", tanh_backward_that_waits)
    worker.join(10)
    assert seen == [[2.0, 2.0, 2.0]]


def test_every_name_refused_is_marked_somewhere():
    """A typo in a refuses= list would refuse nothing: every name an exercise or a slot refuses is marked."""
    from haaw.course.exercises import REGISTRY
    from haaw.course.exercises.code import CodeExercise
    from haaw.engine.plugins import SLOTS

    names = {n for ex in REGISTRY.values() if isinstance(ex, CodeExercise) for n in ex.refuses}
    names |= {n for s in SLOTS.values() for n in s.refuses} | set(guard.BACKWARD)
    assert names - set(guard.REFUSABLE) == set()
