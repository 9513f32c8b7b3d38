"""The claims of notebook 05: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest


def test_05_a_saturated_softmax_crushes_the_gradient():
    from haaw.course.nb05 import softmax_gradient_norm

    z = np.random.default_rng(0).standard_normal(16)
    norms = [softmax_gradient_norm(scale * z) for scale in (1, 10, 30, 100)]
    assert norms == sorted(norms, reverse=True)
    assert norms[-1] < 1e-10 * norms[0]


def test_05_dividing_by_sqrt_dk_keeps_the_score_variance_near_1():
    from haaw.course.nb05 import attention_row, score_variance

    for d_k in (4, 64, 1024):
        assert score_variance(d_k, scaled=False) == pytest.approx(d_k, rel=0.1)
        assert score_variance(d_k, scaled=True) == pytest.approx(1.0, abs=0.1)
    unscaled, scaled = attention_row(512, scaled=False), attention_row(512, scaled=True)
    assert unscaled["max weight"] > 0.999 and scaled["max weight"] < 0.5
    assert unscaled["gradient norm"] < 1e-5 * scaled["gradient norm"]
