"""The claims of notebook 08: each figure or causal claim the notebook states, asserted."""
import numpy as np
import pytest


def test_08_masking_after_the_reduction_makes_the_gradient_depend_on_padding_length():
    from haaw.course.nb08 import gradient, make_model, masked_mean, mean_over_padded, padded_batch

    model = make_model()
    short, long = padded_batch(pad_to=6), padded_batch(pad_to=12)
    (_, right_short), (_, right_long) = gradient(model, masked_mean, short), gradient(model, masked_mean, long)
    (_, wrong_short), (_, wrong_long) = gradient(model, mean_over_padded, short), gradient(model, mean_over_padded, long)
    for a, b in zip(right_short, right_long):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)  # same data, same gradient
    assert np.linalg.norm(wrong_short[0]) == pytest.approx(2 * np.linalg.norm(wrong_long[0]), rel=1e-9)
