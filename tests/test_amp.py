"""Number formats, loss scalers (against torch.amp.GradScaler), master weights, 16-bit compute."""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.amp import (DynamicLossScaler, MasterWeights, StaticLossScaler, cast_report, dtype,
                                  format_table)

OVERFLOWS = [False, True, False, False, False, True, True, False, False, False, False, False, False, False]


def test_the_format_table_has_the_published_limits():
    rows = {r["format"]: r for r in format_table()}
    assert rows["float16"]["max"] == 65504 and rows["float16"]["smallest subnormal"] == 2.0**-24
    assert rows["float16"]["smallest normal"] == 2.0**-14 and rows["float16"]["epsilon"] == 2.0**-10
    assert rows["bfloat16"]["smallest normal"] == rows["float32"]["smallest normal"] and rows["bfloat16"]["epsilon"] == 2.0**-7
    assert rows["float8_e4m3fn"]["max"] == 448 and rows["float8_e5m2"]["max"] == 57344
    assert [rows[f]["bits"] for f in ("float32", "float16", "bfloat16", "float8_e4m3fn")] == [32, 16, 16, 8]


def test_cast_report_counts_underflow_and_overflow():
    values = np.array([1e-9, 1e-3, 1.0, 1e6])
    assert cast_report(values, "float16") == {"zero": 0.25, "inf": 0.25, "kept": 0.5}
    assert cast_report(values, "bfloat16")["kept"] == 1.0
    assert cast_report(values, "float16", scale=1024)["zero"] == 0.0
    assert cast_report(np.array([1e-9, 2.0]), "float16")["zero"] == 0.5  # what became 0, not what became 1


def our_scale_sequence():
    scaler = DynamicLossScaler(1024.0, growth_interval=3)
    seen = []
    for overflow in OVERFLOWS:
        grad = np.full(3, 2.0 * scaler.scale)
        grad[0] = np.inf if overflow else grad[0]
        _, found_inf = scaler.unscale([grad])
        scaler.update(found_inf)
        seen.append((scaler.scale, found_inf))
    return seen


def test_the_dynamic_scaler_matches_torch_grad_scaler_step_for_step():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    theirs = []
    for overflow in OVERFLOWS:
        optimizer.zero_grad()
        scaler.scale((p * 2).sum()).backward()
        if overflow:
            p.grad[0] = float("inf")
        before = p.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        theirs.append((scaler.get_scale(), torch.equal(before, p.detach())))
    assert our_scale_sequence() == theirs
    assert len({scale for scale, _ in theirs}) > 2  # it grew and backed off


def test_a_static_scaler_never_changes_and_unscales_exactly():
    scaler = StaticLossScaler(1024)
    grads, found_inf = scaler.unscale([np.array([2048.0, -1024.0], dtype=np.float16)])
    assert not found_inf and grads[0].dtype == np.float32 and list(grads[0]) == [2.0, -1.0]
    scaler.update(True)
    assert scaler.scale == 1024


def test_master_weights_keep_a_small_update_that_fp16_rounds_away():
    w = Tensor(np.ones(1, dtype=np.float16), requires_grad=True)
    assert (w.data - np.float16(1e-4))[0] == 1.0  # the update alone is lost in fp16
    master = MasterWeights([w], "float16")
    for _ in range(100):
        w.grad = np.full(1, 1e-4, dtype=np.float16)
        assert master.step(StaticLossScaler(1.0), lr=1.0)
    assert master.master[0][0] == pytest.approx(0.99, abs=1e-4)
    assert w.data[0] == np.float16(0.99)


def test_a_frozen_parameter_without_a_gradient_does_not_stop_the_others_training():
    """PyTorch's GradScaler skips None gradients; counting them as overflows would skip every step."""
    frozen = Tensor(np.ones(2, dtype=np.float16))  # never receives a gradient
    w = Tensor(np.ones(2, dtype=np.float16), requires_grad=True)
    master, scaler = MasterWeights([frozen, w], "float16"), DynamicLossScaler(128.0, growth_interval=5)
    for _ in range(12):
        w.grad = np.full(2, scaler.scale, dtype=np.float16)  # dL/dw = 1, scaled
        assert master.step(scaler, lr=0.01)
    assert list(master.master[0]) == [1.0, 1.0]  # the frozen one untouched
    np.testing.assert_allclose(master.master[1], 1 - 12 * 0.01, rtol=1e-5)  # the other one took 12 steps
    assert scaler.scale == 128.0 * 4  # two growths, no back-off
    grads, found_inf = scaler.unscale([None, np.array([1.0], dtype=np.float16)])
    assert grads[0] is None and not found_inf


def test_an_overflowing_step_is_skipped():
    w = Tensor(np.ones(2, dtype=np.float16), requires_grad=True)
    master = MasterWeights([w], "float16")
    w.grad = np.array([np.inf, 1.0], dtype=np.float16)
    scaler = DynamicLossScaler(8.0)
    assert not master.step(scaler, lr=0.1)
    assert list(master.master[0]) == [1.0, 1.0] and scaler.scale == 4.0


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_16_bit_sums_accumulate_in_fp32(name):
    losses = Tensor(np.full(2048, 4.6).astype(dtype(name)))
    assert float(losses.sum().item()) == pytest.approx(2048 * 4.6, rel=1e-2)  # not stuck at 2048
    logits = Tensor(np.random.default_rng(0).standard_normal((2048, 8)).astype(dtype(name)))
    assert F.cross_entropy(logits, np.zeros(2048, dtype=int)).item() > 1.0


def test_the_engine_trains_in_bfloat16_with_bfloat16_gradients():
    x = Tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(dtype("bfloat16")), requires_grad=True)
    w = Tensor(np.ones((3, 2), dtype=dtype("bfloat16")), requires_grad=True)
    F.cross_entropy((x @ w).tanh(), np.array([0, 1, 0, 1])).backward()
    assert x.grad.dtype == dtype("bfloat16") and w.grad.dtype == dtype("bfloat16")


def test_scale_loss_multiplies_in_fp32_so_a_16_bit_loss_cannot_overflow():
    import numpy as np

    from haaw import Tensor
    from haaw.amp import DynamicLossScaler

    logits = Tensor(np.array([4.19], dtype=np.float16), requires_grad=True)
    scaled = DynamicLossScaler().scale_loss(logits.sum())  # 4.19 × 2¹⁶: inf in fp16, 274,596 in fp32
    assert scaled.dtype == np.float32 and np.isfinite(scaled.item())
    assert abs(scaled.item() - 4.19 * 65536) < 65536 * 0.002  # 4.19 itself rounded to fp16


def test_the_scalers_defaults_are_the_documented_ones():
    assert StaticLossScaler().scale == 1024.0
    scaler = DynamicLossScaler()
    assert (scaler.scale, scaler.growth_factor, scaler.backoff_factor, scaler.growth_interval) == (2.0**16, 2.0, 0.5, 2000)
    torch = pytest.importorskip("torch")
    theirs = torch.amp.GradScaler("cpu")
    assert scaler.growth_interval == theirs.get_growth_interval() and scaler.scale == theirs.get_scale()


def test_a_skipped_step_returns_false_and_a_taken_one_true():
    w = Tensor(np.ones(2, dtype=np.float16), requires_grad=True)
    master = MasterWeights([w], "float16")
    w.grad = np.array([np.inf, 1.0], dtype=np.float16)
    assert master.step(DynamicLossScaler(8.0), lr=0.1) is False
    w.grad = np.array([1.0, 1.0], dtype=np.float16)
    assert master.step(DynamicLossScaler(8.0), lr=0.1) is True


# --- autocast, and custom Functions under it ---------------------------------------------------------
def _fp32_pair():
    rng = np.random.default_rng(0)
    return (Tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True),
            Tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True))


def test_autocast_runs_matrix_products_in_16_bits_and_sends_fp32_gradients_to_fp32_weights():
    from haaw import amp

    x, w = _fp32_pair()
    with amp.autocast("cpu", dtype="bfloat16"):
        y = x @ w
        z = F.linear(x, w, Tensor(np.zeros(2, dtype=np.float32)))
        s = y.tanh()  # not a matrix product: the format of its input
        assert amp.is_autocast_enabled() and amp.get_autocast_dtype() == dtype("bfloat16")
    assert y.dtype == z.dtype == s.dtype == dtype("bfloat16") and not amp.is_autocast_enabled()
    y.float().sum().backward()
    assert x.grad.dtype == w.grad.dtype == np.float32
    with amp.autocast(dtype="float16", enabled=False):
        assert (x @ w).dtype == np.float32


def _recording_matmul(decorated: bool, cast_inputs=None):
    """A custom matrix product whose forward and backward use the engine's own products (so autocast reaches
    them); ``seen`` collects the format of every product each pass computed."""
    from haaw import Function, amp

    seen = {"forward": [], "backward": []}
    fwd_deco = amp.custom_fwd(cast_inputs=cast_inputs) if decorated else (lambda f: f)
    bwd_deco = amp.custom_bwd if decorated else (lambda f: f)

    class MyMatmul(Function):
        @staticmethod
        @fwd_deco
        def forward(ctx, a, b):
            ctx.a, ctx.b = a, b
            out = (Tensor(a) @ Tensor(b)).data
            seen["forward"].append(out.dtype)
            return out

        @staticmethod
        @bwd_deco
        def backward(ctx, g):
            grads = ((Tensor(g) @ Tensor(ctx.b).T).data, (Tensor(ctx.a).T @ Tensor(g)).data)
            seen["backward"] += [grads[0].dtype, grads[1].dtype]
            return grads

    return MyMatmul, seen


@pytest.mark.parametrize("decorated", [True, False])
def test_custom_bwd_runs_the_backward_in_the_forward_s_autocast_state_whatever_the_state_at_backward(decorated):
    from haaw import amp

    bf16 = dtype("bfloat16")
    # forward under autocast, backward called outside it
    MyMatmul, seen = _recording_matmul(decorated)
    x, w = _fp32_pair()
    with amp.autocast(dtype="bfloat16"):
        out = MyMatmul.apply(x, w)
    out.float().sum().backward()
    assert seen["forward"] == [bf16]
    assert seen["backward"] == ([bf16, bf16] if decorated else [np.float32, np.float32])
    if decorated:
        assert x.grad.dtype == w.grad.dtype == np.float32  # back in the format of the forward's arguments
    # forward outside autocast, backward called inside it
    MyMatmul, seen = _recording_matmul(decorated)
    x, w = _fp32_pair()
    out = MyMatmul.apply(x, w)
    with amp.autocast(dtype="bfloat16"):
        out.sum().backward()
    assert seen["forward"] == [np.float32]
    assert seen["backward"] == ([np.float32, np.float32] if decorated else [bf16, bf16])


def test_custom_fwd_cast_inputs_runs_the_forward_in_that_format_with_autocast_off_and_only_under_autocast():
    from haaw import amp

    MyMatmul, seen = _recording_matmul(True, cast_inputs=np.float32)
    x16 = Tensor(np.ones((2, 3), dtype=np.float16), requires_grad=True)
    w16 = Tensor(np.ones((3, 2), dtype=np.float16), requires_grad=True)
    with amp.autocast(dtype="float16"):
        out = MyMatmul.apply(x16, w16)
        out.sum().backward()  # backward inside autocast: still run with autocast off, as the forward was
    assert seen == {"forward": [np.float32], "backward": [np.float32, np.float32]}
    assert x16.grad.dtype == w16.grad.dtype == np.float16  # each gradient in its argument's format
    MyMatmul, seen = _recording_matmul(True, cast_inputs=np.float32)
    MyMatmul.apply(x16, w16)  # outside autocast: cast_inputs changes nothing
    assert seen["forward"] == [np.float16]


def test_custom_bwd_without_custom_fwd_says_what_is_missing():
    from haaw import Function, amp

    class Half(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 0.5

        @staticmethod
        @amp.custom_bwd
        def backward(ctx, g):
            return g * 0.5

    x, _ = _fp32_pair()
    with pytest.raises(TypeError, match="custom_fwd"):
        Half.apply(x).sum().backward()


# --- what the mutation run (docs/mutation-survivors.md) found untested -------------------------------------------
def test_an_unknown_format_is_refused_naming_where_it_was_given():
    from haaw import amp

    for make, where in ((lambda: dtype("float12"), "dtype()"), (lambda: amp.autocast(dtype="float12"), "autocast")):
        with pytest.raises(TypeError) as refused:
            make()
        assert str(refused.value) == f"{where}: 'float12' is not a number format (try np.float32, np.float16 or 'bfloat16')"


def test_cast_report_without_a_scale_stores_the_values_as_they_are_and_widens_16_bit_input_first():
    """fp16: 1e-8 is below its smallest subnormal (6e-8), 4e4 is below its largest (65504), 1 is exact."""
    assert cast_report(np.array([1e-8, 4e4, 1.0]), "float16") == {"zero": 1 / 3, "inf": 0.0, "kept": 2 / 3}
    # 1 · 2¹⁶ fits float32; computed in float16 it would overflow to inf before being stored
    assert cast_report(np.array([1.0], dtype=np.float16), "float32", scale=2.0**16) == {"zero": 0.0, "inf": 0.0,
                                                                                        "kept": 1.0}


def test_unscale_gives_fp32_gradients_whatever_their_format():
    """The docstring's promise, which the fp32 master update relies on: a float64 gradient is rounded to fp32 first."""
    grads, found_inf = StaticLossScaler(3.0).unscale([np.array([1 / 3]), np.array([2.0], dtype=np.float16), None])
    assert [g.dtype for g in grads[:2]] == [np.float32, np.float32] and grads[2] is None and not found_inf
    assert grads[0][0] == np.float32(1 / 3) / np.float32(3.0)
    assert grads[1][0] == np.float32(2 / 3)


def test_master_weights_default_to_fp16_parameters_with_fp32_masters():
    w = Tensor(np.array([1.0, 1e-4]), requires_grad=True)
    masters = MasterWeights([w])
    assert w.data.dtype == np.float16 and [m.dtype for m in masters.master] == [np.float32]
    w.grad = np.array([1e-4, 1e-4], dtype=np.float16)
    for _ in range(10):  # 1e-8 a step: lost against 1 in fp16 (and in fp32), kept against 1e-4 in fp32
        masters.step(StaticLossScaler(1.0), lr=1e-4)
    assert masters.master[0][0] == np.float32(1.0) and masters.master[0][1] < np.float32(1e-4)


def test_autocast_s_default_format_is_bfloat16_and_outside_autocast_the_format_it_would_use_is_too():
    """As PyTorch on the CPU: torch.autocast("cpu") runs in bfloat16, and torch.get_autocast_dtype("cpu") says so."""
    from haaw import amp

    bf16 = dtype("bfloat16")
    assert not amp.is_autocast_enabled() and amp.get_autocast_dtype() == bf16
    x = Tensor(np.ones((2, 2), dtype=np.float32))
    with amp.autocast():
        assert amp.is_autocast_enabled() and amp.get_autocast_dtype() == bf16 and (x @ x).dtype == bf16
    torch = pytest.importorskip("torch")
    assert torch.get_autocast_dtype("cpu") == torch.bfloat16


def test_custom_fwd_and_custom_bwd_called_with_a_device_type_decorate_as_they_do_bare():
    from haaw import Function, amp

    seen = []

    class Double(Function):
        @staticmethod
        @amp.custom_fwd(device_type="cpu")
        def forward(ctx, a):
            return (Tensor(a) @ np.eye(2, dtype=a.dtype)).data * 2

        @staticmethod
        @amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            out = (Tensor(g) @ np.eye(2, dtype=np.float32)).data * 2
            seen.append(out.dtype)
            return out

    x = Tensor(np.ones((2, 2), dtype=np.float32), requires_grad=True)
    with amp.autocast(dtype="bfloat16"):
        out = Double.apply(x)
    out.float().sum().backward()  # outside autocast: the backward still runs in it, and its gradient comes back fp32
    assert seen == [dtype("bfloat16")] and x.grad.dtype == np.float32 and x.grad.tolist() == [[2.0, 2.0]] * 2


@pytest.mark.parametrize("name", ["autocast", "is_autocast_enabled", "get_autocast_dtype", "custom_fwd", "custom_bwd"])
def test_a_device_type_other_than_cpu_is_refused_by_name(name):
    """It was accepted and ignored, a typo too; PyTorch refuses a name that is not a device, and haaw has one."""
    from haaw import amp

    call = {"autocast": lambda d: amp.autocast(d), "custom_fwd": lambda d: amp.custom_fwd(device_type=d),
            "custom_bwd": lambda d: amp.custom_bwd(device_type=d)}.get(name, lambda d: getattr(amp, name)(d))
    call("cpu")
    for device in ("CPU", "cuda", None):
        with pytest.raises(ValueError) as refused:
            call(device)
        assert str(refused.value) == (f"{name}: device_type {device!r} is not haaw's device; haaw computes on the CPU "
                                      "only, so write device_type='cpu'")
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):  # "Expected one of cpu, cuda, ... device type at start of device string: CPU"
        torch.autocast("CPU")
