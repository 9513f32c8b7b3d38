"""The claims of notebook 01: each figure or causal claim the notebook states, asserted."""
import pytest

from haaw.course.nb01 import tiny_chain_step
from haaw.tools import gradcheck


def test_01_tiny_chain_numbers_from_the_engine_and_finite_differences():
    s = tiny_chain_step(w=2.0, x=3.0, lr=0.01)
    assert (s.y, s.loss, s.dL_dy, s.dy_dw, s.dL_dw) == (6.0, 36.0, 12.0, 3.0, 36.0)
    report = gradcheck(lambda w: (w * 3.0) ** 2, 2.0)
    assert report.ok
    assert report.rows[0].numeric.item() == pytest.approx(36.0, rel=1e-9)


def test_01_one_sgd_step_moves_w_to_1_64_and_lowers_the_loss():
    s = tiny_chain_step(w=2.0, x=3.0, lr=0.01)
    assert s.w_new == pytest.approx(1.64, abs=1e-12)
    assert s.loss_new == pytest.approx(24.2064) and s.loss_new < s.loss
