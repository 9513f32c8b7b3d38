"""Custom operations and checkpointing (haaw/engine/function.py), against closed forms and PyTorch."""
import numpy as np
import pytest

import haaw
from haaw import Tensor
from haaw.engine import guard
from haaw.engine.function import RANDOM_SOURCES, Checkpoint, Function, random_source


@pytest.mark.parametrize("checkpoint_first", [False, True])
def test_a_checkpoint_that_captures_an_outer_intermediate_counts_each_path_once(checkpoint_first):
    # L = Σ h + Σ z·h with h = 2x: dL/dx = 2 + 2z, dL/dz = h, whatever the order of the two terms
    x, z = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 5.0], requires_grad=True)
    h = x * 2
    outer, inner = h.sum(), haaw.checkpoint(lambda t: t * h, z).sum()
    (inner + outer if checkpoint_first else outer + inner).backward()
    np.testing.assert_array_equal(x.grad, [8.0, 12.0])
    np.testing.assert_array_equal(z.grad, [2.0, 4.0])
    # h is a parent of the checkpoint's result, as in PyTorch's graph: its .grad is the sum of both paths, 1 + z
    # (PyTorch's h.retain_grad() gives [4, 6] too)
    np.testing.assert_array_equal(h.grad, [4.0, 6.0])


def test_a_hook_on_an_intermediate_a_checkpoint_uses_sees_the_sum_of_both_paths_once():
    """Hand values: L = Σ z·h + Σ h with h = 2x, so dL/dh = z + 1 = [4, 6], and the hook sees that once. It saw
    [3, 5] in the recomputation's pass, then [1, 1] in the enclosing one, as PyTorch's one pass never does."""
    x, z = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 5.0], requires_grad=True)
    h = x * 2
    seen = []
    h.register_hook(lambda g: seen.append(g.tolist()))
    (haaw.checkpoint(lambda t: t * h, z).sum() + h.sum()).backward()
    assert seen == [[4.0, 6.0]]
    np.testing.assert_array_equal(x.grad, [8.0, 12.0])


def test_two_checkpoints_sharing_a_captured_intermediate_match_pytorch():
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    rng = np.random.default_rng(0)
    xs, ws = rng.standard_normal((3, 4)), rng.standard_normal((4, 4))

    def run(lib, x, w, ckpt):
        h = (x @ w).tanh()
        a = ckpt(lambda t: (t * h).exp(), x)
        b = ckpt(lambda t: t @ w * h, a)
        return (b.sum() + (h * h).sum() + a.sum())

    x, w = Tensor(xs.copy(), requires_grad=True), Tensor(ws.copy(), requires_grad=True)
    run(haaw, x, w, haaw.checkpoint).backward()
    xt, wt = torch.tensor(xs, requires_grad=True), torch.tensor(ws, requires_grad=True)
    run(torch, xt, wt, lambda f, t: torch_checkpoint(f, t, use_reentrant=False)).backward()
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(w.grad, wt.grad.numpy(), rtol=1e-10)


def test_backward_of_a_checkpoint_inside_no_grad_computes_the_gradients_as_pytorch():
    """The recomputation ran under the caller's no_grad(), recorded nothing, and every gradient stayed None."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    data = np.array([0.5, -1.0, 2.0])
    x, tx = Tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    y = haaw.checkpoint(lambda t: (t * t).tanh().sum(), x)
    ty = torch_checkpoint(lambda t: (t * t).tanh().sum(), tx, use_reentrant=False)
    with haaw.no_grad():
        y.backward()
    with torch.no_grad():
        ty.backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("preserve", [True, False])
def test_the_recomputation_draws_the_forward_pass_s_random_numbers_and_moves_no_later_draw(preserve):
    """A mask drawn inside fn (dropout) was drawn afresh by the recomputation: the gradient used another mask.
    As torch's preserve_rng_state=True, the default: the same draws, and the generator left where it was."""
    x = Tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)

    def fn(t):  # both random sources: NumPy's global generator and haaw's (the layers' first weights)
        return t * Tensor(np.random.rand(4)) + t * haaw.nn.Linear(1, 4).weight.reshape(4)

    np.random.seed(0)
    haaw.manual_seed(0)
    y = haaw.checkpoint(fn, x, preserve_rng_state=preserve)
    slope = y.data / x.data  # y = x · (u + w): the slope the forward pass drew
    np.random.seed(1)
    haaw.manual_seed(1)
    expected_next = (np.random.rand(), haaw.nn.Linear(1, 1).weight.item())
    np.random.seed(1)
    haaw.manual_seed(1)
    y.backward(np.ones(4))
    if preserve:
        np.testing.assert_allclose(x.grad, slope, rtol=1e-12)
        assert (np.random.rand(), haaw.nn.Linear(1, 1).weight.item()) == expected_next
    else:
        assert not np.allclose(x.grad, slope)


def test_arguments_that_are_not_tensors_reach_fn_as_they_are():
    """checkpoint(f, x, 1) made 1 a Tensor (f failed using it as a dim), and a float argument made a float32
    result float64."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    seen = []

    def fn(t, dim, scale, flag):
        seen.append((type(dim), type(scale), flag))
        return (t * scale).sum(dim=dim) if flag else t

    x, tx = Tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True)
    y, ty = haaw.checkpoint(fn, x, 1, 0.5, "yes"), torch_checkpoint(fn, tx, 1, 0.5, "yes", use_reentrant=False)
    assert y.dtype == np.float32 and str(ty.dtype) == "torch.float32"
    y.backward(np.ones(2, dtype=np.float32))
    ty.backward(torch.ones(2))
    np.testing.assert_allclose(y.data, ty.detach().numpy())
    np.testing.assert_allclose(x.grad, tx.grad.numpy())
    assert set(seen) == {(int, float, "yes")}


def test_a_generator_registered_with_random_source_is_replayed_by_the_recomputation():
    gen = np.random.default_rng(7)  # a generator of the learner's own, unknown to the engine until registered
    random_source(lambda: gen.bit_generator.state, lambda state: setattr(gen.bit_generator, "state", state))
    try:
        x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = haaw.checkpoint(lambda t: t * Tensor(gen.random(3)), x)
        slope = y.data / x.data  # y = x · u: the u the forward pass drew
        y.backward(np.ones(3))
        np.testing.assert_allclose(x.grad, slope, rtol=1e-12)
    finally:
        RANDOM_SOURCES.pop()


def test_the_checkpoint_operation_applied_directly_replays_the_random_state_by_default():
    """Checkpoint.apply(fn, x), without checkpoint()'s keywords: every input a Tensor, the random state kept."""
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    np.random.seed(0)
    y = Checkpoint.apply(lambda t: t * Tensor(np.random.rand(3)), x)
    slope = y.data / x.data
    y.backward(np.ones(3))
    np.testing.assert_allclose(x.grad, slope, rtol=1e-12)


def test_checkpoint_is_refused_while_it_is_what_a_learner_is_writing():
    """Exercise 06's checkpoint refuses the engine's (guard.py); its forward and its backward both check."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    with guard.refusing(["function.Checkpoint"]):
        with pytest.raises(guard.ShortcutRefused, match="the engine's Checkpoint"):
            haaw.checkpoint(lambda t: t * t, x)
    y = haaw.checkpoint(lambda t: t * t, x).sum()
    with guard.refusing(["function.Checkpoint"]):
        with pytest.raises(guard.ShortcutRefused, match="the engine's Checkpoint"):
            y.backward()
    assert x.grad is None


class NoForward(Function):
    pass


class NoBackward(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2


class ReturnsATensor(Function):
    @staticmethod
    def forward(ctx, a):
        return Tensor(a)


class ReturnsNone(Function):
    @staticmethod
    def forward(ctx, a):
        return None


class Scale(Function):
    @staticmethod
    def forward(ctx, a, k):
        return a * k


class OneGradient(Scale):
    @staticmethod
    def backward(ctx, g):
        return (g,)


class GradientForANumber(Scale):
    @staticmethod
    def backward(ctx, g):
        return g * 3.0, g


x12 = Tensor([1.0, 2.0], requires_grad=True)


@pytest.mark.parametrize("make, error, message", [
    (lambda: NoForward.apply(x12), NotImplementedError,
     "write forward(ctx, *args): it receives NumPy arrays and returns one"),
    (lambda: NoBackward.apply(x12).sum().backward(), NotImplementedError,
     "write backward(ctx, g): it returns one gradient per argument of forward"),
    (lambda: ReturnsATensor.apply(x12), TypeError, "ReturnsATensor.forward returned a Tensor: forward works on NumPy "
     "arrays, return one (its inputs arrive as arrays, and what it returns is wrapped for you)"),
    (lambda: ReturnsNone.apply(x12), TypeError, "ReturnsNone.forward returned None: return its result, a NumPy array"),
    (lambda: OneGradient.apply(x12, 3.0).sum().backward(), ValueError, "OneGradient.backward returned 1 gradient(s) "
     "for the 2 argument(s) of forward: return one per argument (None where there is none)"),
    (lambda: GradientForANumber.apply(x12, 3.0).sum().backward(), ValueError,
     "GradientForANumber.backward returned a gradient for argument 1 of forward, which is not a Tensor (float): "
     "return None in that place (gradients go in the order of forward's arguments)"),
    (lambda: haaw.checkpoint(lambda t: t.data, x12), TypeError, "checkpoint: fn must return a Tensor, got ndarray"),
    (lambda: haaw.checkpoint(lambda t: t, x12, use_reentrant=True), NotImplementedError,
     "checkpoint(use_reentrant=True): haaw's checkpoint is PyTorch's non-reentrant one; pass use_reentrant=False, "
     "or leave it out"),
])
def test_a_custom_operation_written_wrong_gets_the_whole_message(make, error, message):
    with pytest.raises(error) as err:
        make()
    assert str(err.value) == message


@pytest.mark.parametrize("extra", [(), (3.0,)], ids=["no inputs", "a number only"])
def test_a_checkpoint_whose_inputs_hold_no_tensor_sends_gradients_to_what_fn_captures(extra):
    """fn uses only a weight from outside: PyTorch's non-reentrant checkpoint gives the weight its gradient.
    Hand value: d/dw of k·Σw² is 2kw."""
    w = haaw.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32), requires_grad=True)
    out = haaw.checkpoint(lambda *k: (w * w).sum() * (k[0] if k else 1.0), *extra)
    out.backward()
    k = extra[0] if extra else 1.0
    assert out.dtype == np.float32 and w.grad is not None and w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad, 2 * k * np.array([1.0, 2.0, 3.0]), rtol=1e-6)


# --- selective checkpointing and saved_tensors_hooks ---------------------------------------------------------
def _block_stack():
    from haaw.course import nb06

    blocks, layers = nb06.make_stack(depth=4, width=8)
    return blocks, layers, np.random.default_rng(1).standard_normal((5, 8))


def test_selective_checkpointing_gives_the_same_gradients_and_recomputes_none_of_the_kept_operations():
    from functools import partial

    from haaw.course import nb06
    from haaw.tools.flops import count_flops
    from haaw.tools.memory import track_memory

    blocks, layers, x0 = _block_stack()
    measured = {}
    checkpoint = haaw.checkpoint
    for name, keep in (("none", None), ("full", checkpoint), ("selective", partial(checkpoint, save=("linear",)))):
        for layer in layers:
            layer.zero_grad()
        with track_memory() as memory, count_flops() as flops:
            x = nb06.run_stack(blocks, x0, None if keep is None else 1, keep=keep or checkpoint)
        measured[name] = (x.grad, [p.grad.copy() for layer in layers for p in layer.parameters()], memory.peak,
                          dict(flops.recompute))
    for name in ("full", "selective"):
        assert np.array_equal(measured[name][0], measured["none"][0])
        assert all(np.array_equal(a, b) for a, b in zip(measured[name][1], measured["none"][1]))
    assert "linear" in measured["full"][3] and "linear" not in measured["selective"][3]
    assert sum(measured["selective"][3].values()) > 0  # the layer norms and GELUs: recomputed
    assert sum(measured["selective"][3].values()) < sum(measured["full"][3].values()) - measured["full"][3]["linear"] + 1
    assert measured["full"][2] < measured["selective"][2] < measured["none"][2]


def test_selective_checkpointing_keeps_only_what_it_can_and_says_which():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(ValueError, match=r"'tanh' cannot be kept.*'linear', 'matmul'"):
        haaw.checkpoint(lambda h: (h @ h).tanh(), x, save=("tanh",))


def test_saved_tensors_hooks_pack_every_saved_array_and_unpack_it_for_backward():
    from haaw import saved_tensors_hooks

    rng = np.random.default_rng(0)
    a, w = Tensor(rng.standard_normal((3, 4)), requires_grad=True), Tensor(rng.standard_normal((4, 2)), requires_grad=True)
    ((a @ w).tanh() * 3.0).sum().backward()
    expected = a.grad.copy(), w.grad.copy()
    a.grad = w.grad = None
    log = []

    def pack(array):
        log.append(("pack", array.shape))
        return ("elsewhere", array.copy())

    def unpack(packed):
        log.append(("unpack", packed[1].shape))
        return packed[1]

    with saved_tensors_hooks(pack, unpack):
        y = (a @ w).tanh() * 3.0
    assert [e for e in log if e[0] == "pack"] and not [e for e in log if e[0] == "unpack"]
    y.sum().backward()
    assert sorted(e[1] for e in log if e[0] == "pack") == sorted(e[1] for e in log if e[0] == "unpack")
    assert np.array_equal(a.grad, expected[0]) and np.array_equal(w.grad, expected[1])


def test_the_memory_tracker_does_not_count_what_pack_moved_out_of_its_sight():
    from haaw import saved_tensors_hooks
    from haaw.tools.memory import track_memory

    class Away:
        __slots__ = ("array",)

        def __init__(self, array):
            self.array = array

    x = Tensor(np.ones((4, 4)), requires_grad=True)
    with track_memory() as kept:
        (x.tanh().tanh()).sum()
    with track_memory() as moved, saved_tensors_hooks(Away, lambda away: away.array):
        y = x.tanh().tanh().sum()
    with track_memory() as same, saved_tensors_hooks(lambda a: a, lambda a: a):
        x.tanh().tanh().sum()
    assert kept.peak > 0 and moved.peak == 0 and same.peak == kept.peak
    y.backward()
    assert np.allclose(x.grad, (1 - np.tanh(np.tanh(1.0))**2) * (1 - np.tanh(1.0)**2))


def test_a_selective_checkpoint_runs_a_kept_operation_once_and_the_others_twice(monkeypatch):
    from haaw.engine.ops import OPS

    calls = {"matmul": 0, "tanh": 0}
    for name in calls:
        original = OPS[name].forward

        def counted(ctx, *arrays, _original=original, _name=name, **params):
            calls[_name] += 1
            return _original(ctx, *arrays, **params)

        monkeypatch.setattr(OPS[name], "forward", counted)
    x = Tensor(np.random.default_rng(2).standard_normal((3, 3)), requires_grad=True)
    haaw.checkpoint(lambda h: (h @ h).tanh(), x, save=("matmul",)).sum().backward()
    assert calls == {"matmul": 1, "tanh": 2}
    expected = x.grad.copy()
    x.grad = None
    ((x @ x).tanh()).sum().backward()
    np.testing.assert_array_equal(x.grad, expected)


def test_a_function_that_gives_no_gradient_for_an_intermediate_stops_the_pass_there_as_pytorch():
    """backward returning None for an argument that needs a gradient: PyTorch passes nothing on through it (the
    leaf behind it keeps grad None) and the other branches get theirs."""
    class Drop(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return (None,)

    x, w = Tensor([1.0, 2.0], requires_grad=True), Tensor([1.0, 1.0], requires_grad=True)
    (Drop.apply(x * 2) * w).sum().backward()
    assert x.grad is None
    np.testing.assert_array_equal(w.grad, [2.0, 4.0])
    v, u = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)
    ((v * 3).sum() + Drop.apply(u * 2).sum()).backward()  # the branch after the stopped one still gets its own
    assert u.grad is None and v.grad.tolist() == [3.0]
    torch = pytest.importorskip("torch")

    class TorchDrop(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return None

    tx, tw = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 1.0], requires_grad=True)
    (TorchDrop.apply(tx * 2) * tw).sum().backward()
    assert tx.grad is None
    np.testing.assert_array_equal(w.grad, tw.grad.numpy())


def test_a_checkpoint_whose_result_needs_no_gradient_sends_none_to_what_it_captured_as_pytorch():
    """fn uses the intermediate h but returns a detached result: no gradient reaches h through it. PyTorch:
    L = Σ(y + h·h) with h = 2x gives dL/dx = 2·2h = 8x, [8, 16], from the h·h path alone. (PyTorch's y does not
    require grad; haaw's records the checkpoint all the same, and its backward hands h None.)"""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint as torch_checkpoint

    def loss(x, ckpt):
        h = x * 2
        y = ckpt(lambda a: (a * h).detach(), x)
        return (y + h * h).sum()

    x, xt = Tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    loss(x, haaw.checkpoint).backward()
    loss(xt, lambda f, a: torch_checkpoint(f, a, use_reentrant=False)).backward()
    np.testing.assert_array_equal(x.grad, xt.grad.numpy())
    np.testing.assert_array_equal(x.grad, [8.0, 16.0])


def test_a_recomputation_that_reaches_an_intermediate_of_the_enclosing_pass_keeps_its_running_sum():
    """fn multiplies its input a = 2h by 1 in the forward pass and by h = x² when it runs again, so only the
    recomputation's pass reaches h, after the enclosing pass has sent h its first share (L = Σ fn(a) + Σ h: the
    Σ h term is reached before the checkpoint, h itself after). That share must survive the recomputation's pass:
    then x gets the gradient of Σ a·h + Σ h = Σ 2h² + Σ h, 2x(4h + 1) = 222 at x = 3. Resetting h's share leaves
    216 (the 1 of Σ h lost, 2x·1 = 6)."""
    x = Tensor([3.0], requires_grad=True)
    h = x * x
    runs = []

    def fn(a):
        runs.append(1)
        return a * (Tensor([1.0]) if len(runs) == 1 else h)

    (haaw.checkpoint(fn, h * 2).sum() + h.sum()).backward()
    assert len(runs) == 2
    np.testing.assert_array_equal(x.grad, [222.0])
