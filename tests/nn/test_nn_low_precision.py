"""haaw.nn's functions in 16-bit formats: where a few features or a cube lose their digits or overflow, they compute in
float32 and round once, as PyTorch does. (The engine's operations in 16 bits: tests/engine/test_low_precision.py.)"""
import numpy as np
import pytest

import haaw.nn.functional as F
from haaw import Tensor
from haaw.amp import dtype


@pytest.mark.parametrize("features", [2, 3, 8])
def test_layer_norm_in_float16_is_as_accurate_as_rounding_its_float32_result(features):
    """In 16 bits the mean and variance of a few features lose their digits; like PyTorch, compute in float32."""
    x = (np.random.default_rng(features).standard_normal((64, features)) * 3 + 5).astype(np.float16)
    wide = x.astype(np.float64)
    exact = (wide - wide.mean(-1, keepdims=True)) / np.sqrt(wide.var(-1, keepdims=True) + 1e-5)
    ours = F.layer_norm(Tensor(x, requires_grad=True), (features,))
    assert ours.data.dtype == np.float16
    rounding = np.abs(exact.astype(np.float16).astype(np.float64) - exact).max()  # the least error fp16 allows
    assert np.abs(ours.data.astype(np.float64) - exact).max() <= 2 * rounding + 1e-6
    ours.sum().backward()  # and the gradient flows back in float16


def test_gelu_in_16_bits_neither_overflows_nor_gives_a_nan_gradient():
    for name in ("float16", "bfloat16"):
        x = Tensor(np.array([40000.0, 1.0, -3.0]).astype(dtype(name)), requires_grad=True)
        y = F.gelu(x)
        y.sum().backward()
        assert y.data.dtype == dtype(name) and np.all(np.isfinite(y.data.astype(np.float64)))
        wide = Tensor(np.array([40000.0, 1.0, -3.0]), requires_grad=True)  # the same in float64
        F.gelu(wide).sum().backward()
        np.testing.assert_allclose(x.grad.astype(np.float64), wide.grad, rtol=2e-2, atol=3e-3)
