"""haaw/engine/checks.py: what the engine refuses, and the whole message a learner reads for it.

tests/engine/test_tensor.py matches each refusal by a few words; here every message is written out in full, by
hand, because the message is what the learner acts on: a changed hint, a wrong range or a dropped clause is a bug
the learner sees."""
import ml_dtypes
import numpy as np
import pytest

import haaw
from haaw import Tensor, detect_anomaly
from haaw.engine.tensor import apply

MAX = np.iinfo(np.intp).max
TAIL = "(matching trailing dimensions must be equal, or one of them 1)"
ONCE = "a tensor of shape (2, 3) needs each of its 2 axes exactly once (numbers from -2 to 1)"
x23 = Tensor(np.ones((2, 3)))


@pytest.mark.parametrize("make, error, message", [
    (lambda: Tensor(np.ones(3)) @ Tensor(np.ones((3, 2))), ValueError,
     "matmul: (3,) @ (3, 2): both sides need at least 2 dimensions; reshape a vector to (1, n) or (n, 1)"),
    (lambda: Tensor(np.ones(3)) + Tensor(np.ones(2)), ValueError, f"add: shapes (3,) and (2,) cannot be broadcast together {TAIL}"),
    (lambda: Tensor(np.ones(3)) - Tensor(np.ones(2)), ValueError, f"sub: shapes (3,) and (2,) cannot be broadcast together {TAIL}"),
    (lambda: Tensor(np.ones(3)) * Tensor(np.ones(2)), ValueError, f"mul: shapes (3,) and (2,) cannot be broadcast together {TAIL}"),
    (lambda: Tensor(np.ones(3)) / Tensor(np.ones(2)), ValueError, f"div: shapes (3,) and (2,) cannot be broadcast together {TAIL}"),
    (lambda: x23.sum(dim=2), IndexError,
     "sum: dim 2 is out of range for a tensor of shape (2, 3) (expected an integer from -2 to 1)"),
    (lambda: x23.sum(dim=(0, -2)), ValueError, "sum: dim (0, -2) names the same axis twice"),
    (lambda: x23.softmax(dim=-3), IndexError,
     "softmax: dim -3 is out of range for a tensor of shape (2, 3) (expected an integer from -2 to 1)"),
    (lambda: x23.softmax(axis=(0, 1)), TypeError,
     "softmax: dim must be one integer (it works along one axis), got (0, 1)"),
    (lambda: x23.log_softmax(dim=[1]), TypeError,
     "log_softmax: dim must be one integer (it works along one axis), got [1]"),
    (lambda: x23.reshape(2.0, 3), ValueError,
     "reshape: cannot reshape (2, 3) (6 numbers) into (2.0, 3): the new shape holds something that is not an integer"),
    (lambda: x23.reshape(4, 2), ValueError,
     "reshape: cannot reshape (2, 3) (6 numbers) into (4, 2): the number of entries differs"),
    (lambda: x23.reshape(-1, -1), ValueError, "reshape: cannot reshape (2, 3) (6 numbers) into (-1, -1): at most one "
     "entry may be -1 (inferred from the others), and no other entry may be negative"),
    # -2 is not "the rest" (PyTorch: invalid shape dimension -2), though some NumPy versions read it so
    (lambda: x23.reshape(-2, 3), ValueError, "reshape: cannot reshape (2, 3) (6 numbers) into (-2, 3): at most one "
     "entry may be -1 (inferred from the others), and no other entry may be negative"),
    # the largest size an array may have is refused only because 0 numbers do not fill it; one more is too large
    (lambda: Tensor(np.ones(0)).reshape(MAX), ValueError,
     f"reshape: cannot reshape (0,) (0 numbers) into ({MAX},): the number of entries differs"),
    (lambda: Tensor(np.ones(0)).reshape(MAX + 1), ValueError,
     f"reshape: cannot reshape (0,) (0 numbers) into ({MAX + 1},): a size is larger than an array can have"),
    (lambda: x23.permute(0, 0), ValueError, f"permute(0, 0): {ONCE}"),
    # two good axes and one that is none (PyTorch: "number of dims don't match in permute")
    (lambda: x23.permute(1, 0, 5), ValueError, f"permute(1, 0, 5): {ONCE}"),
    (lambda: x23.permute(1, 0, 0.5), ValueError, f"permute(1, 0, 0.5): {ONCE}"),
    # var's and std's arguments in PyTorch's order: (dim, unbiased, keepdim), or a bool first for unbiased
    (lambda: x23.var(False, True), TypeError, "var: the first argument is a bool, read as unbiased (PyTorch's "
     "var(unbiased)); then give no second one. For dim and unbiased write x.var(0, False)"),
    (lambda: x23.std(0, 1), TypeError, "std: the second argument is unbiased, a bool, as in PyTorch (got 1); keepdim "
     "comes third, or by name: x.std(0, keepdim=True)"),
    (lambda: x23.std(0, True, correction=0), TypeError, "std: give unbiased= or correction=, not both (PyTorch "
     "refuses both too); unbiased=False is correction=0"),
])
def test_each_refusal_says_all_it_should(make, error, message):
    with pytest.raises(error) as err:
        make()
    assert str(err.value) == message


def test_a_wrong_shaped_gradient_is_refused_with_the_shapes_and_the_rule():
    x = Tensor(np.ones((4, 3)))
    w, b = Tensor(np.ones((3, 2)), requires_grad=True), Tensor(np.zeros(2), requires_grad=True)
    with haaw.use(linear=lambda X, W, G: (G @ W.T, G.T @ X, G.sum(axis=0))):  # dW transposed
        with pytest.raises(ValueError) as err:
            apply("linear", x, w, b).sum().backward()
    assert str(err.value) == ("the backward of 'linear' returned a gradient of shape (2, 3) for its input 1, which has "
                              "shape (3, 2): a gradient has the shape of what it is the gradient of")


def test_anomaly_mode_sees_a_bfloat16_overflow():
    """bfloat16 is an ml_dtypes type whose NumPy kind is 'V', not 'f': it still holds floats that overflow."""
    big = Tensor(np.array([3e38, 1.0], dtype=ml_dtypes.bfloat16))  # bfloat16's largest is about 3.39e38
    with detect_anomaly(), np.errstate(over="ignore"):
        with pytest.raises(FloatingPointError, match="forward of 'add' produced nan or inf from finite inputs"):
            big + big  # two bfloat16 tensors: the sum is computed, and overflows, in bfloat16 itself
    with np.errstate(over="ignore"):
        assert np.isinf(np.asarray((big + big).data, dtype=np.float64)[0])  # outside anomaly mode: no check
