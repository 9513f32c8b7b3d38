"""haaw/nn/utils.py: clip_grad_norm_ for every p-norm, against hand values and PyTorch's own."""
import numpy as np
import pytest

from haaw import Tensor
from haaw.nn.utils import clip_grad_norm_

GRADS = [[3.0, -4.0], [[-5.0], [1.0]]]  # |g|: 3, 4, 5, 1


def _params(grads):
    params = [Tensor(np.zeros(np.shape(g)), requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = np.array(g)
    return params


# (Σ|g|ᵖ)^(1/p) by hand: p=1: 13; p=0.5: (√3 + 2 + √5 + 1)²; p=3: (27+64+125+1)^(1/3); inf: the largest, 5
@pytest.mark.parametrize("norm_type, total", [
    (1, 13.0), (0.5, (3**0.5 + 2.0 + 5**0.5 + 1.0) ** 2), (3.0, 217.0 ** (1 / 3)), (float("inf"), 5.0),
    ("inf", 5.0),
])
def test_every_p_norm_is_measured_over_every_entry_and_every_gradient_is_scaled_by_one_factor(norm_type, total):
    params = _params(GRADS)
    assert clip_grad_norm_(params, max_norm=2.0, norm_type=norm_type) == pytest.approx(total, rel=1e-12)
    for p, g in zip(params, GRADS):
        np.testing.assert_allclose(p.grad, np.array(g) * 2.0 / total, rtol=1e-5)


@pytest.mark.parametrize("norm_type", [1.0, 0.5, 2.0, 3.0, float("inf")])
def test_clip_grad_norm_matches_pytorch_to_the_last_bits(norm_type):
    """PyTorch scales by max_norm / (total + 1e-6); the 1e-6 shows in the seventh digit, so compare closely."""
    torch = pytest.importorskip("torch")
    ours = _params(GRADS)
    theirs = [torch.zeros(np.shape(g), dtype=torch.float64, requires_grad=True) for g in GRADS]
    for t, g in zip(theirs, GRADS):
        t.grad = torch.tensor(g, dtype=torch.float64)
    n_ours = clip_grad_norm_(ours, 2.0, norm_type=norm_type)
    n_theirs = torch.nn.utils.clip_grad_norm_(theirs, 2.0, norm_type=norm_type).item()
    np.testing.assert_allclose(n_ours, n_theirs, rtol=1e-12)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad, t.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
def test_with_no_gradient_to_clip_the_norm_is_zero(norm_type):
    """PyTorch returns 0 too: nothing measured, nothing scaled."""
    empty = Tensor(np.zeros(0), requires_grad=True)
    empty.grad = np.zeros(0)
    assert clip_grad_norm_([Tensor(np.ones(2), requires_grad=True), empty], 1.0, norm_type) == 0.0
    assert clip_grad_norm_([], 1.0, norm_type) == 0.0


@pytest.mark.parametrize("norm_type", [0, -1.0, float("nan")])
def test_a_norm_type_that_is_not_positive_is_refused(norm_type):
    with pytest.raises(ValueError) as err:
        clip_grad_norm_(_params(GRADS), 1.0, norm_type)
    assert str(err.value) == ("clip_grad_norm_: norm_type must be positive (2.0, 1.0, float('inf')), "
                              f"got {float(norm_type)}")
