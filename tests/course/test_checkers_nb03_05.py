"""The code checkers of notebooks 03 to 05 against wrong code written the way learners write it, none of it built
from the checkers' own lists of mistakes: each is refused and told what it did, and a named mistake is named only
when the code computes exactly that; the right code, in the other forms people write it, passes, fast."""
import math
import tracemalloc

import numpy as np
import pytest

from haaw.course.exercises import REGISTRY, check
from haaw.course.exercises import code as code_module
from haaw.course.exercises.core import CORRECT, WRONG
from haaw.engine import guard


def refused(key, fn, *words, named=None):
    """Refuse ``fn``, saying ``words``; name the mistake ``named`` (and only it), or none."""
    feedback = check(key, fn)
    assert feedback.status == WRONG, feedback.message
    for w in words:
        assert w in feedback.message, (w, feedback.message)
    if named is None:
        assert "This looks like" not in feedback.message, feedback.message
    else:
        assert f"This looks like {named}:" in feedback.message, feedback.message
    return feedback.message


def passes(key, fn):
    feedback = check(key, fn)
    assert feedback.status == CORRECT, feedback.message


# --- 03-linear-backward: any number of leading axes, and the inputs' dtype kept ------------------------------
LINEAR = "03-linear-backward"


def linear_for_two_or_three_axes(X, W, G):
    if X.ndim == 3:  # a batch of sequences
        dW = np.einsum("bti,btj->ij", X, G)
        db = G.sum(axis=(0, 1))
    else:
        dW = X.T @ G
        db = G.sum(axis=0)
    return G @ W.T, dW, db


def linear_summing_one_batch_axis(X, W, G):
    dW = np.swapaxes(X, -1, -2) @ G
    if dW.ndim == 3:  # one dW per sequence: add them up
        dW = dW.sum(axis=0)
    return G @ W.T, dW, G.reshape(-1, G.shape[-1]).sum(axis=0)


def linear_with_a_float64_accumulator(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    dW = np.zeros(W.shape)  # float64, whatever the inputs are
    for x, g in zip(rows_X, rows_G):
        dW += np.outer(x, g)
    return G @ W.T, dW, rows_G.sum(axis=0)


def linear_summing_the_bias_in_float64(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, rows_X.T @ rows_G, np.sum(rows_G, axis=0, dtype=np.float64)  # "for accuracy"


def linear_in_float32_to_save_memory(X, W, G):
    X, W, G = X.astype(np.float32), W.astype(np.float32), G.astype(np.float32)
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)


def linear_averaging_over_the_rows(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, rows_X.T @ rows_G / len(rows_X), rows_G.sum(axis=0)


def linear_bias_with_keepdims(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0, keepdims=True)


def linear_dx_left_as_rows(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    return rows_G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)  # dX never reshaped back to X's shape


@pytest.mark.parametrize("fn, words", [
    (linear_for_two_or_three_axes, ["four axes", "raised ValueError", "dW = X.T @ G"]),
    (linear_summing_one_batch_axis, ["four axes", "dW has shape (2, 3, 5, 3), but it must have shape (5, 3)"]),
    (linear_with_a_float64_accumulator,
     ["float32", "dW is float64, but the inputs are float32", "must be float32 too", "np.zeros(shape) is float64"]),
    (linear_summing_the_bias_in_float64, ["db is float64, but the inputs are float32", "dtype=np.float64"]),
    (linear_in_float32_to_save_memory, ["hand-checkable", "dX is float32, but the inputs are float64"]),
    (linear_averaging_over_the_rows, ["hand-checkable", "dW: wrong values"]),
    (linear_bias_with_keepdims, ["db has shape (1, 2), but it must have shape (2,)"]),
    (linear_dx_left_as_rows, ["a batch of sequences", "dX has shape (10, 3), but it must have shape (2, 5, 3)"]),
], ids=lambda x: getattr(x, "__name__", ""))
def test_wrong_linear_backward_is_refused(fn, words):
    refused(LINEAR, fn, *words)


def linear_with_tensordot(X, W, G):
    rows = list(range(X.ndim - 1))
    return np.tensordot(G, W, axes=([-1], [1])), np.tensordot(X, G, axes=(rows, rows)), G.sum(axis=tuple(rows))


def linear_with_einsum_on_rows(X, W, G):
    n, m = X.shape[-1], G.shape[-1]
    rows_X, rows_G = X.reshape(-1, n), G.reshape(-1, m)
    return np.einsum("...j,ij->...i", G, W), np.einsum("ri,rj->ij", rows_X, rows_G), np.einsum("rj->j", rows_G)


def linear_with_an_accumulator_of_the_inputs_dtype(X, W, G):
    rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
    dW = np.zeros_like(W)
    for x, g in zip(rows_X, rows_G):
        dW += np.outer(x, g)
    return G @ W.T, dW, rows_G.sum(axis=0)


@pytest.mark.parametrize("fn", [linear_with_tensordot, linear_with_einsum_on_rows,
                                linear_with_an_accumulator_of_the_inputs_dtype], ids=lambda f: f.__name__)
def test_right_linear_backward_passes(fn):
    passes(LINEAR, fn)


def test_the_engine_never_hands_linear_backward_a_single_example_as_one_axis():
    """A 1-D input is made a row of one before the engine's linear runs, so the exercise has no 1-D case."""
    import haaw.nn.functional as F
    from haaw import Tensor
    from haaw.engine import plugins

    seen = []

    def spy(X, W, G):
        seen.append(X.shape)
        rows_X, rows_G = X.reshape(-1, X.shape[-1]), G.reshape(-1, G.shape[-1])
        return G @ W.T, rows_X.T @ rows_G, rows_G.sum(axis=0)

    x = Tensor(np.ones(3), requires_grad=True)
    with plugins.use(linear=spy):
        F.linear(x, Tensor(np.ones((3, 2)), requires_grad=True), Tensor(np.zeros(2), requires_grad=True)).sum().backward()
    assert seen == [(1, 3)] and x.grad.shape == (3,)


# --- 03-unbroadcast -------------------------------------------------------------------------------------------
UNBROADCAST = "03-unbroadcast"


def unbroadcast_matching_axes_from_the_left(g, shape):
    for axis, size in enumerate(shape):  # the stretched axes first, counted from the left of g
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    return g


def unbroadcast_summing_trailing_axes(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=-1)  # the added axes are in front, not at the end
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def unbroadcast_one_added_axis_only(g, shape):
    if g.ndim > len(shape):  # an if where a while is needed
        g = g.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def unbroadcast_keeping_the_added_axes(g, shape):
    extra = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(extra)), keepdims=True)
    for axis, size in enumerate(shape):
        if size == 1 and g.shape[extra + axis] != 1:
            g = g.sum(axis=extra + axis, keepdims=True)
    return g


def unbroadcast_squeezed(g, shape):
    extra = g.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1)
    return np.squeeze(g.sum(axis=axes, keepdims=True))  # squeezes the 1s that shape keeps, too


@pytest.mark.parametrize("fn, words", [
    (unbroadcast_matching_axes_from_the_left, ["(2, 4, 3) down to (4, 1)", "the result has shape (1, 3)"]),
    (unbroadcast_summing_trailing_axes, ["(4, 3) down to (3,)", "the result has shape (4,)"]),
    (unbroadcast_one_added_axis_only, ["down to a single number", "the result has shape (3,)"]),
    (unbroadcast_keeping_the_added_axes, ["(4, 3) down to (3,)", "the result has shape (1, 3)"]),
    (unbroadcast_squeezed, ["(4, 3) down to (4, 1)", "the result has shape (4,)"]),
], ids=lambda x: getattr(x, "__name__", ""))
def test_wrong_unbroadcast_is_refused(fn, words):
    refused(UNBROADCAST, fn, *words)


def unbroadcast_in_one_sum(g, shape):
    extra = g.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(extra + i for i, n in enumerate(shape) if n == 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def unbroadcast_from_the_right(g, shape):
    for i in range(1, len(shape) + 1):
        if shape[-i] == 1 and g.shape[-i] != 1:
            g = g.sum(axis=-i, keepdims=True)
    return g.reshape((-1,) + tuple(shape)).sum(axis=0)


@pytest.mark.parametrize("fn", [unbroadcast_in_one_sum, unbroadcast_from_the_right], ids=lambda f: f.__name__)
def test_right_unbroadcast_passes(fn):
    passes(UNBROADCAST, fn)


# --- 03-cross-entropy -----------------------------------------------------------------------------------------
CROSS_ENTROPY = "03-cross-entropy"


def cross_entropy_with_an_eps_in_the_log(logits, targets):
    B = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    P = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(P[np.arange(B), targets] + 1e-12))  # "so that log never sees 0"
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return loss, (P - T) / B


def cross_entropy_with_clipped_probabilities(logits, targets):
    B = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    P = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(np.clip(P[np.arange(B), targets], 1e-7, 1.0)))
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return loss, (P - T) / B


def cross_entropy_every_row_at_every_target(logits, targets):
    B = len(targets)
    shifted = logits - logits.max(axis=1, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=1))
    loss = np.mean(lse - shifted[:, targets])  # (B, B): each row at every row's target
    P = np.exp(shifted - lse[:, None])
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return loss, (P - T) / B


def cross_entropy_max_down_the_columns(logits, targets):
    B = len(targets)
    with np.errstate(all="ignore"):
        shifted = logits - logits.max(axis=0, keepdims=True)  # one max per class, not per row
        lse = np.log(np.exp(shifted).sum(axis=1))
        P = np.exp(shifted - lse[:, None])
    T = np.zeros_like(P)
    T[np.arange(B), targets] = 1
    return np.mean(lse - shifted[np.arange(B), targets]), (P - T) / B


@pytest.mark.parametrize("fn, words", [
    (cross_entropy_with_an_eps_in_the_log, ["a confident wrong answer", "loss: wrong values", "Never take the log"]),
    (cross_entropy_with_clipped_probabilities, ["a confident wrong answer", "loss: wrong values"]),
    (cross_entropy_every_row_at_every_target, ["hand-checkable", "loss: wrong values"]),
    (cross_entropy_max_down_the_columns, ["hand-checkable", "loss: wrong values"]),
], ids=lambda x: getattr(x, "__name__", ""))
def test_wrong_cross_entropy_is_refused(fn, words):
    refused(CROSS_ENTROPY, fn, *words)


def cross_entropy_with_an_identity_matrix(logits, targets):
    B = len(targets)
    lse = np.logaddexp.reduce(logits, axis=1)
    P = np.exp(logits - lse[:, None])
    return np.mean(lse - logits[np.arange(B), targets]), (P - np.eye(logits.shape[1])[targets]) / B


def test_right_cross_entropy_with_an_identity_matrix_passes():
    passes(CROSS_ENTROPY, cross_entropy_with_an_identity_matrix)


# --- 04-tanh-backward -----------------------------------------------------------------------------------------
TANH = "04-tanh-backward"


def tanh_square_outside(y, G):
    return G * (1 - y) ** 2


def tanh_twice_the_slope(y, G):
    return 2 * G * (1 - y * y)  # the 2 of d(y²) = 2y dy, carried over


def tanh_summed_with_a_dot(y, G):
    return np.dot(G.ravel(), (1 - y * y).ravel())


def tanh_with_a_plus(y, G):
    return G * (1 + y * y)


def tanh_with_y_clipped_first(y, G):
    y = np.clip(y, -0.999, 0.999)  # "to stay away from ±1"
    return G * (1 - y * y)


def tanh_through_sech_of_y(y, G):
    return G / np.cosh(y) ** 2  # sech² of the output: tanh taken twice


@pytest.mark.parametrize("fn, words, named", [
    (tanh_square_outside, ["hand-checkable", "dx: wrong values"], None),
    (tanh_twice_the_slope, ["hand-checkable", "dx: wrong values"], None),
    (tanh_summed_with_a_dot, ["dx has shape (), but it must have shape (4,)"], None),
    (tanh_with_a_plus, ["hand-checkable", "dx: wrong values"], None),
    (tanh_with_y_clipped_first, ["saturated", "dx: wrong values"], None),
    (tanh_through_sech_of_y, ["hand-checkable"], "tanh applied twice"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_tanh_backward_is_refused(fn, words, named):
    refused(TANH, fn, *words, named=named)


@pytest.mark.parametrize("fn", [lambda y, G: G * (1 - y) * (1 + y), lambda y, G: G - G * y**2])
def test_right_tanh_backward_passes(fn):
    passes(TANH, fn)


# --- 04-relu-backward: an output of 1e-300 is an active unit --------------------------------------------------
RELU = "04-relu-backward"


def relu_above_a_small_threshold(y, G):
    return G * (y > 1e-3)


def relu_above_machine_epsilon(y, G):
    return G * (y > np.finfo(y.dtype).eps)


def relu_above_the_smallest_normal_number(y, G):
    return G * (y > np.finfo(y.dtype).tiny)  # subnormal outputs are positive too


def relu_mask_after_a_cast_to_float32(y, G):
    return G * (y.astype(np.float32) > 0)  # 1e-300 is 0 in float32


def relu_with_a_soft_mask(y, G):
    return G * np.minimum(y * 1e10, 1.0)


def relu_mask_by_rounding(y, G):
    return G * np.round(np.clip(y, 0, 1) + 0.49)


def relu_dividing_y_by_itself(y, G):
    with np.errstate(invalid="ignore"):
        return G * y / y


def relu_zeroing_G_in_place(y, G):
    G[y <= 0] = 0
    return G


def relu_from_the_sign_of_G(y, G):
    return G * (G > 0)


TINY = "an output of exactly 0 is a dead unit"


@pytest.mark.parametrize("fn, words, named", [
    (relu_above_a_small_threshold, ["tiny positive outputs", "float64, y = 1e-300", TINY], None),
    (relu_above_machine_epsilon, ["tiny positive outputs", TINY], None),
    (relu_above_the_smallest_normal_number, ["tiny positive outputs", "5e-324", TINY], None),
    (relu_mask_after_a_cast_to_float32, ["tiny positive outputs", "after a cast to a narrower format"], None),
    (relu_with_a_soft_mask, ["tiny positive outputs", TINY], None),
    (relu_mask_by_rounding, ["tiny positive outputs", TINY], None),
    (relu_dividing_y_by_itself, ["hand-checkable", "nan or inf"], None),
    (relu_zeroing_G_in_place, ["changes one of its inputs in place", "G[y <= 0] = 0"], None),
    (relu_from_the_sign_of_G, ["hand-checkable"], "ReLU applied to the gradient"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_relu_backward_is_refused(fn, words, named):
    refused(RELU, fn, *words, named=named)


def test_a_mask_that_is_wrong_only_in_float32_is_refused_by_the_float32_case():
    def relu_backward(y, G):  # float64 compared with 0 itself; float32 with float32's smallest normal number
        return G * (y > (np.finfo(np.float32).tiny if y.dtype == np.float32 else 0))

    refused(RELU, relu_backward, "tiny positive outputs: float32, y = 1e-30, 1e-38, 1e-45", TINY)


@pytest.mark.parametrize("fn", [lambda y, G: G * np.sign(y), lambda y, G: G * (y != 0),
                                lambda y, G: np.where(y > 0, G, 0), lambda y, G: G * np.heaviside(y, 0)])
def test_right_relu_backward_passes(fn):
    passes(RELU, fn)


# --- 04-init-std ----------------------------------------------------------------------------------------------
INIT = "04-init-std"


def init_std_with_the_smaller_side(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / min(shape))


def init_std_with_the_larger_side(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / max(shape))


def init_std_glorot_s_uniform_bound(shape, nonlinearity):
    return np.sqrt(6 / (shape[0] + shape[1]))


def init_std_over_both_fans(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / sum(shape))


def init_std_by_the_last_axis(shape, nonlinearity):
    return np.sqrt((2.0 if nonlinearity == "relu" else 1.0) / shape[-1])  # PyTorch's layout is (out, in)


@pytest.mark.parametrize("fn, words, named", [
    (init_std_with_the_smaller_side, ["shape (100, 10), 'linear'", "std: wrong values"], None),
    (init_std_with_the_larger_side, ["shape (3, 500), 'relu'", "std: wrong values"], None),
    (init_std_glorot_s_uniform_bound, ["shape (64, 64), 'relu'", "std: wrong values"], None),
    (init_std_over_both_fans, ["shape (64, 64), 'relu'", "std: wrong values"], None),
    (init_std_by_the_last_axis, ["shape (100, 10), 'linear'"], "fan-out for fan-in"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_init_std_is_refused(fn, words, named):
    refused(INIT, fn, *words, named=named)


def test_right_init_std_with_the_gain_inside_passes():
    passes(INIT, lambda shape, nonlinearity: 1 / np.sqrt(shape[0] / (2 if nonlinearity == "relu" else 1)))


# --- 04-clip-grad-norm ----------------------------------------------------------------------------------------
CLIP = "04-clip-grad-norm"


def clip_with_the_tensors_norms_added(grads, max_norm):
    norm = sum(np.linalg.norm(g) for g in grads)  # ‖a‖ + ‖b‖ is not the norm of (a, b)
    scale = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


def clip_with_max_for_min(grads, max_norm):
    norm = float(np.sqrt(sum(np.sum(g * g) for g in grads)))
    scale = max(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


def clip_without_the_square_root(grads, max_norm):
    norm = float(sum(np.sum(g * g) for g in grads))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


def clip_by_the_root_mean_square(grads, max_norm):
    flat = np.concatenate([g.ravel() for g in grads])
    norm = float(np.sqrt(np.mean(flat**2)))  # a mean where the norm has a sum
    scale = min(1.0, max_norm / (norm + 1e-6))
    return [g * scale for g in grads], norm


def clip_dividing_a_python_zero(grads, max_norm):
    norm = math.sqrt(sum(float(np.sum(g**2)) for g in grads))
    return [g * min(1.0, max_norm / norm) for g in grads], norm


@pytest.mark.parametrize("fn, words", [
    (clip_with_the_tensors_norms_added, ["hand-checkable", "the clipped gradients: wrong values"]),
    (clip_with_max_for_min, ["hand-checkable", "the clipped gradients: wrong values"]),
    (clip_without_the_square_root, ["hand-checkable", "the clipped gradients: wrong values"]),
    (clip_by_the_root_mean_square, ["hand-checkable", "the clipped gradients: wrong values"]),
    (clip_dividing_a_python_zero, ["all zero", "ZeroDivisionError"]),
], ids=lambda x: getattr(x, "__name__", ""))
def test_wrong_clip_grad_norm_is_refused(fn, words):
    refused(CLIP, fn, *words)


def test_right_clip_grad_norm_without_the_small_constant_passes():
    def clip(grads, max_norm):
        norm = np.sqrt(sum(np.sum(g**2) for g in grads))
        if norm > max_norm:
            grads = [g * (max_norm / norm) for g in grads]
        return list(grads), norm

    passes(CLIP, clip)


# --- 05-softmax-backward: never the Jacobian ------------------------------------------------------------------
SOFTMAX = "05-softmax-backward"
JACOBIAN = ("building the Jacobian (a row-length × row-length matrix) is what this exercise asks you to avoid: the "
            "product needs only s and G")


def softmax_jacobian_row_by_row(s, G):
    rows_s, rows_G = s.reshape(-1, s.shape[-1]), G.reshape(-1, G.shape[-1])
    out = np.stack([(np.diag(r) - np.outer(r, r)) @ g for r, g in zip(rows_s, rows_G)])
    return out.reshape(s.shape)


def softmax_jacobian_with_einsum(s, G):
    J = np.einsum("...i,ij->...ij", s, np.eye(s.shape[-1])) - np.einsum("...i,...j->...ij", s, s)
    return np.einsum("...ij,...j->...i", J, G)


def softmax_jacobian_by_broadcasting(s, G):
    J = s[..., :, None] * (np.eye(s.shape[-1]) - s[..., None, :])  # diag(s) − s sᵀ, all rows at once
    return (J @ G[..., None])[..., 0]


def softmax_jacobian_rows_one_by_one(s, G):  # never the whole matrix, but every row of it: n² work
    rows_s, rows_G = s.reshape(-1, s.shape[-1]), G.reshape(-1, G.shape[-1])
    out = np.zeros_like(rows_s)
    for b in range(len(rows_s)):
        for i in range(rows_s.shape[1]):
            row = -rows_s[b, i] * rows_s[b]
            row[i] += rows_s[b, i]
            out[b, i] = row @ rows_G[b]
    return out.reshape(s.shape)


@pytest.mark.parametrize("fn", [softmax_jacobian_row_by_row, softmax_jacobian_with_einsum,
                                softmax_jacobian_by_broadcasting], ids=lambda f: f.__name__)
def test_building_the_jacobian_is_refused_by_name_at_once(fn):
    message = refused(SOFTMAX, fn, "long rows: 2 rows of 2,000 weights", JACOBIAN, "one 2,000 × 2,000 Jacobian is 32 MB")
    assert "very long rows" not in message  # refused on rows of 2,000: the rows of 20,000 never run


@pytest.mark.slow  # it waits for the time limit
def test_a_jacobian_applied_row_by_row_runs_out_of_time_and_is_told_why(monkeypatch):
    monkeypatch.setattr(code_module, "TIME_LIMIT", 0.5)
    refused(SOFTMAX, softmax_jacobian_rows_one_by_one, "was stopped", JACOBIAN, "20,000 weights")


def test_watching_the_memory_leaves_tracemalloc_as_it_found_it():
    passes(SOFTMAX, lambda s, G: s * (G - np.sum(G * s, axis=-1, keepdims=True)))
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        refused(SOFTMAX, softmax_jacobian_row_by_row, JACOBIAN)
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def softmax_inner_product_down_the_columns(s, G):
    return s * (G - np.sum(G * s, axis=0, keepdims=True))


def softmax_inner_product_without_keepdims(s, G):
    return s * (G - np.sum(G * s, axis=-1))


def softmax_with_a_mean(s, G):
    return s * (G - np.mean(G * s, axis=-1, keepdims=True))


def softmax_with_a_matrix_product(s, G):
    return s * (G - G @ s)  # ⟨G, s⟩ for one row; rows of a batch do not multiply that way


def softmax_sign_flipped(s, G):
    return s * (np.sum(G * s, axis=-1, keepdims=True) - G)


def softmax_diagonal_only(s, G):
    return G * s * (1 - s)


@pytest.mark.parametrize("fn, words, named", [
    (softmax_inner_product_down_the_columns, ["a batch of rows", "dz: wrong values"], None),
    (softmax_inner_product_without_keepdims, ["a batch of rows", "raised ValueError"], None),
    (softmax_with_a_mean, ["hand-checkable", "dz: wrong values"], None),
    (softmax_with_a_matrix_product, ["a batch of rows", "raised ValueError"], None),
    (softmax_sign_flipped, ["hand-checkable", "dz: wrong values"], None),
    (softmax_diagonal_only, ["hand-checkable"], "only the diagonal of the Jacobian (a sigmoid's slope)"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_softmax_backward_is_refused(fn, words, named):
    refused(SOFTMAX, fn, *words, named=named)


def softmax_with_einsum(s, G):
    return s * G - s * np.einsum("...i,...i->...", s, G)[..., None]


def softmax_in_python_lists(s, G):  # slow, but linear in the row length: no Jacobian
    out = []
    for s_row, g_row in zip(s.reshape(-1, s.shape[-1]).tolist(), G.reshape(-1, G.shape[-1]).tolist()):
        inner = sum(a * b for a, b in zip(s_row, g_row))
        out.append([a * (b - inner) for a, b in zip(s_row, g_row)])
    return np.array(out, dtype=s.dtype).reshape(s.shape)


@pytest.mark.parametrize("fn", [softmax_with_einsum, softmax_in_python_lists], ids=lambda f: f.__name__)
def test_right_softmax_backward_passes(fn):
    passes(SOFTMAX, fn)


# --- 05-attention-backward: the inputs' dtype kept -----------------------------------------------------------
ATTENTION = "05-attention-backward"


def _softmax_rows(S):
    top = np.max(S, axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))
    total = E.sum(axis=-1, keepdims=True)
    return np.divide(E, total, out=np.zeros_like(E), where=total > 0)


def attention_scaled_by_np_sqrt(Q, K, V, mask, G):
    d = Q.shape[-1]
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d)  # a NumPy float64 number: float32 in, float64 out
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = _softmax_rows(S)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K / np.sqrt(d), np.swapaxes(dS, -1, -2) @ Q / np.sqrt(d), dV


def attention_masked_with_a_large_negative_number(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -1e9)  # a fully masked row becomes uniform, not 0
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    P = E / E.sum(axis=-1, keepdims=True)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


def attention_reusing_P_for_dS(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = _softmax_rows(S)
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P
    dS *= dP - np.sum(dP * P, axis=-1, keepdims=True)  # P is dS now, and dV below needs P
    dV = np.swapaxes(P, -1, -2) @ G
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


def attention_with_dot_T(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    S = Q @ K.T * scale  # .T reverses every axis of a batch
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = _softmax_rows(S)
    dV = P.T @ G
    dP = G @ V.T
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, dS.T @ Q * scale, dV


def attention_mask_multiplied_into_the_scores(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = S * mask  # a masked score becomes 0, which still gets weight
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    P = E / E.sum(axis=-1, keepdims=True)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


def attention_scale_left_off_dK(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = _softmax_rows(S)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q, dV


def attention_without_the_mask(Q, K, V, mask, G):
    scale = Q.shape[-1] ** -0.5
    P = _softmax_rows(Q @ np.swapaxes(K, -1, -2) * scale)  # the mask never used
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


@pytest.mark.parametrize("fn, words, named", [
    (attention_scaled_by_np_sqrt, ["float32", "dQ is float64, but the inputs are float32", "np.sqrt(d)"], None),
    (attention_masked_with_a_large_negative_number, ["a fully masked query (row 2)", "dQ: wrong values"], None),
    (attention_reusing_P_for_dS, ["hand-checkable", "dV: wrong values"], None),
    (attention_with_dot_T, ["batch and heads", "raised ValueError"], None),
    (attention_mask_multiplied_into_the_scores, ["a causal mask", "dQ: wrong values"], None),
    (attention_scale_left_off_dK, ["hand-checkable", "dK: wrong values"], None),
    (attention_without_the_mask, ["a causal mask"], "the mask ignored in backward"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_attention_backward_is_refused(fn, words, named):
    refused(ATTENTION, fn, *words, named=named)


def attention_with_math_sqrt_and_nan_to_num(Q, K, V, mask, G):
    scale = 1 / math.sqrt(Q.shape[-1])  # a Python float keeps float32
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    with np.errstate(invalid="ignore"):
        E = np.exp(S - S.max(axis=-1, keepdims=True))
        P = np.nan_to_num(E / E.sum(axis=-1, keepdims=True))  # a fully masked row: 0/0, made 0
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


def attention_with_a_scale_of_the_inputs_dtype(Q, K, V, mask, G):
    scale = Q.dtype.type(1) / np.sqrt(Q.dtype.type(Q.shape[-1]))  # np.float32 for float32 inputs
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = _softmax_rows(S)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


@pytest.mark.parametrize("fn", [attention_with_math_sqrt_and_nan_to_num, attention_with_a_scale_of_the_inputs_dtype],
                         ids=lambda f: f.__name__)
def test_right_attention_backward_passes(fn):
    passes(ATTENTION, fn)


# --- 05-layer-norm-backward -----------------------------------------------------------------------------------
LAYER_NORM = "05-layer-norm-backward"


def _normalised(x, eps):
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (x - mu) / sigma, sigma


def layer_norm_averaging_the_weight_gradients(x, weight, G, eps=1e-5):
    x_hat, sigma = _normalised(x, eps)
    g = G * weight
    dx = (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)) / sigma
    rows = tuple(range(G.ndim - 1))
    return dx, (G * x_hat).mean(axis=rows), G.mean(axis=rows)  # a mean where the weight's uses add up


def layer_norm_weight_applied_after(x, weight, G, eps=1e-5):
    x_hat, sigma = _normalised(x, eps)
    dx = (G - G.mean(-1, keepdims=True) - x_hat * (G * x_hat).mean(-1, keepdims=True)) / sigma * weight
    rows = tuple(range(G.ndim - 1))
    return dx, (G * x_hat).sum(axis=rows), G.sum(axis=rows)


def layer_norm_with_eps_squared(x, weight, G, eps=1e-5):
    return _layer_norm_with_sigma(x, weight, G, lambda var: np.sqrt(var + eps**2))


def layer_norm_with_its_own_eps(x, weight, G, eps=1e-5):
    return _layer_norm_with_sigma(x, weight, G, lambda var: np.sqrt(var + 1e-5))  # the argument ignored


def layer_norm_with_np_std_plus_eps(x, weight, G, eps=1e-5):
    return _layer_norm_with_sigma(x, weight, G, lambda var: np.sqrt(var) + eps)  # np.std(x) + eps


def _layer_norm_with_sigma(x, weight, G, sigma_of):
    mu = x.mean(axis=-1, keepdims=True)
    sigma = sigma_of(((x - mu) ** 2).mean(axis=-1, keepdims=True))
    x_hat = (x - mu) / sigma
    g = G * weight
    dx = (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True)) / sigma
    rows = tuple(range(G.ndim - 1))
    return dx, (G * x_hat).sum(axis=rows), G.sum(axis=rows)


def layer_norm_means_without_keepdims(x, weight, G, eps=1e-5):
    x_hat, sigma = _normalised(x, eps)
    g = G * weight
    dx = (g - g.mean(-1) - x_hat * (g * x_hat).mean(-1)) / sigma
    rows = tuple(range(G.ndim - 1))
    return dx, (G * x_hat).sum(axis=rows), G.sum(axis=rows)


@pytest.mark.parametrize("fn, words, named", [
    (layer_norm_averaging_the_weight_gradients, ["a batch of rows", "dweight: wrong values"], None),
    (layer_norm_weight_applied_after, ["a batch of rows", "dx: wrong values"], None),
    (layer_norm_with_eps_squared, ["a batch of rows", "dx: wrong values"], None),
    (layer_norm_with_its_own_eps, ["hand-checkable", "eps = 0", "dx: wrong values"], None),
    (layer_norm_means_without_keepdims, ["a batch of rows", "raised ValueError"], None),
    (layer_norm_with_np_std_plus_eps, ["a batch of rows"], "eps outside the square root"),
], ids=lambda x: getattr(x, "__name__", None) or "")
def test_wrong_layer_norm_backward_is_refused(fn, words, named):
    refused(LAYER_NORM, fn, *words, named=named)


def test_right_layer_norm_backward_with_a_reciprocal_square_root_passes():
    passes(LAYER_NORM, lambda x, weight, G, eps=1e-5: _layer_norm_with_sigma(x, weight, G,
                                                                              lambda var: 1 / (var + eps) ** -0.5))


# --- every code exercise of 03 to 05: the right code passes the new batteries ------------------------------------
# (how long a check takes is measured by scripts/exercise_mutants.py, which reports the slowest, not asserted here:
# a wall-clock bound fails on a loaded machine, not on slow code)
@pytest.mark.parametrize("key", [LINEAR, UNBROADCAST, CROSS_ENTROPY, TANH, RELU, INIT, CLIP, SOFTMAX, ATTENTION,
                                 LAYER_NORM])
def test_the_course_s_code_passes(key):

    passes(key, guard.unguarded(REGISTRY[key].reference))


# --- 05-softmax-grad: an answer computed in float32 -----------------------------------------------------------
@pytest.mark.parametrize("answer", [np.float32(-0.15), np.float32(0.3) * np.float32(0.0 - 0.5),
                                    float(np.float32(-0.15))], ids=["np.float32", "float32 arithmetic", ".item()"])
def test_an_answer_computed_in_float32_is_right(answer):
    assert check("05-softmax-grad", answer).status == CORRECT


# --- 05-attention-backward: a softmax without its shift overflows on large scores --------------------------------
def attention_without_the_shift(Q, K, V, mask, G):
    """Right on small scores: the exponentials are taken of the raw scores."""
    scale = Q.shape[-1] ** -0.5
    S = Q @ np.swapaxes(K, -1, -2) * scale
    E = np.exp(S) if mask is None else np.where(mask, np.exp(S), 0.0)
    total = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
    dV = np.swapaxes(P, -1, -2) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    return dS @ K * scale, np.swapaxes(dS, -1, -2) @ Q * scale, dV


def test_attention_without_the_stable_softmax_s_shift_is_refused_on_large_scores():
    with np.errstate(all="ignore"):
        refused(ATTENTION, attention_without_the_shift, "large scores", "subtract each row's own largest score")


# --- 03-grad-check: a gradient checker, written as learners write it --------------------------------------
GRAD_CHECK = "03-grad-check"


def grad_check_flat(f, x, grad, coords, h):  # right: through a flat copy, np.maximum for the scale
    errors = []
    for i in coords:
        k = np.ravel_multi_index(i, x.shape)
        step = np.zeros(x.size)
        step[k] = h
        n = (f(x + step.reshape(x.shape)) - f(x - step.reshape(x.shape))) / (2 * h)
        a = grad[i]
        errors.append(0.0 if a == n == 0 else abs(a - n) / np.maximum(abs(a), abs(n)))
    return errors


def grad_check_in_place(f, x, grad, coords, h):  # nudges x itself, and puts it back
    errors = []
    for i in coords:
        x[i] += h
        up = f(x)
        x[i] -= 2 * h
        down = f(x)
        x[i] += h
        n = (up - down) / (2 * h)
        errors.append(abs(grad[i] - n) / max(abs(grad[i]), abs(n), 1e-300))
    return errors


def grad_check_forward(f, x, grad, coords, h):  # a one-sided step, written with a fresh copy each time
    out = []
    for i in coords:
        moved = np.array(x, copy=True)
        moved[i] = moved[i] + h
        n = (f(moved) - f(x)) / h
        out.append(abs(grad[i] - n) / max(abs(grad[i]), abs(n)) if max(abs(grad[i]), abs(n)) else 0.0)
    return np.array(out)


def grad_check_mean_denominator(f, x, grad, coords, h):  # |a − n| / ((|a| + |n|) / 2): not the asked convention
    out = []
    for i in coords:
        p, m = x.copy(), x.copy()
        p[i] += h
        m[i] -= h
        n = (f(p) - f(m)) / (2 * h)
        s = (abs(grad[i]) + abs(n)) / 2
        out.append(abs(grad[i] - n) / s if s else 0.0)
    return np.array(out)


def grad_check_no_zero_guard(f, x, grad, coords, h):  # 0/0 where both are 0: nan
    out = []
    for i in coords:
        p, m = x.copy(), x.copy()
        p[i] += h
        m[i] -= h
        n = (f(p) - f(m)) / (2 * h)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.abs(grad[i] - n) / np.maximum(np.abs(grad[i]), np.abs(n)))
    return np.array(out)


def grad_check_whole_vector(f, x, grad, coords, h):  # one difference along all coordinates at once
    n = (f(x + h) - f(x - h)) / (2 * h)
    return np.array([abs(grad[i] - n) / max(abs(grad[i]), abs(n)) for i in coords])


def test_a_gradient_checker_written_another_right_way_passes():
    passes(GRAD_CHECK, grad_check_flat)


def test_a_checker_that_nudges_its_input_in_place_is_told_so():
    refused(GRAD_CHECK, grad_check_in_place, "changes one of its inputs in place")


def test_a_one_sided_checker_is_named():
    refused(GRAD_CHECK, grad_check_forward, named="a one-sided difference")


@pytest.mark.parametrize("fn", [grad_check_mean_denominator, grad_check_no_zero_guard, grad_check_whole_vector])
def test_checkers_with_other_mistakes_are_refused_without_a_wrong_name(fn):
    refused(GRAD_CHECK, fn, named=None)
