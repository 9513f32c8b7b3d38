"""16-bit formats multiply and add up in float32, then round once, as accelerators do: without it a
bfloat16 sum of 100,000 numbers lands nowhere near the true sum. (haaw.nn's layer_norm and gelu in 16 bits:
tests/nn/test_nn_low_precision.py.)"""
import ml_dtypes
import numpy as np
import pytest

from haaw.engine.tensor import Tensor, apply

rng = np.random.default_rng(0)
FORMATS = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


def in_float32(*arrays):
    return [a.astype(np.float32) for a in arrays]


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_matmul_forward_and_backward_accumulate_in_float32_and_round_once(dtype):
    a, b = rng.standard_normal((64, 512)).astype(dtype), rng.standard_normal((512, 32)).astype(dtype)
    g = rng.standard_normal((64, 32)).astype(dtype)
    A, B = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = A @ B
    out.backward(g)
    a32, b32, g32 = in_float32(a, b, g)
    assert out.dtype == dtype and A.grad.dtype == dtype
    np.testing.assert_array_equal(out.data, (a32 @ b32).astype(dtype))
    np.testing.assert_array_equal(A.grad, (g32 @ b32.T).astype(dtype))
    np.testing.assert_array_equal(B.grad, (a32.T @ g32).astype(dtype))


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_sums_and_means_accumulate_in_float32(dtype):
    x = rng.standard_normal(100_000).astype(dtype)
    exact = float(x.astype(np.float64).sum())
    total = Tensor(x).sum().item()
    assert total == float(np.float32(x.astype(np.float32).sum()).astype(dtype))
    assert abs(total - exact) <= 0.01 * abs(exact) + 0.5  # a plain 16-bit running sum is off by far more
    assert Tensor(x).mean().item() == pytest.approx(exact / x.size, rel=1e-2, abs=1e-3)


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_a_bias_gradient_sums_the_batch_in_float32(dtype):
    b = Tensor(np.zeros(3, dtype=dtype), requires_grad=True)
    x = Tensor(np.zeros((4096, 3), dtype=dtype))
    (x + b).backward(np.ones((4096, 3), dtype=dtype))
    np.testing.assert_array_equal(b.grad, np.full(3, 4096.0, dtype=dtype))  # 16-bit alone stalls at 256/2048


@pytest.mark.parametrize("dtype", FORMATS, ids=str)
def test_the_linear_operation_runs_in_16_bits_and_matches_float32_to_its_precision(dtype):
    x, w, bias = rng.standard_normal((8, 16)), rng.standard_normal((16, 4)), rng.standard_normal(4)
    low = apply("linear", *(Tensor(a.astype(dtype)) for a in (x, w, bias)))
    assert low.dtype == dtype
    np.testing.assert_allclose(low.data.astype(np.float64), x @ w + bias, rtol=0.05, atol=0.1)


def test_a_format_named_by_a_string_needs_nothing_imported_first():
    """haaw.tensor(..., dtype="bfloat16") worked only once something had imported ml_dtypes (which registers the
    name with NumPy); a fresh interpreter got "data type 'bfloat16' not understood"."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = ("import sys, haaw; assert 'ml_dtypes' not in sys.modules; "
            "print(haaw.tensor([1.0, 2.5], dtype='bfloat16').dtype, haaw.Tensor([3.0], dtype='float8_e4m3fn').dtype)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["bfloat16", "float8_e4m3fn"]
