"""Exercises of notebook 03: matrices, Y = XW."""
import numpy as np

from ...engine import guard
from .code import Case, CodeExercise, Mistake
from .core import ArrayExercise, NumberExercise, register
from .domain import DRAWN, VALUES, Domain, leading, sample

# Small integers, so the products can be done by hand; B = 4 examples, n = 3 inputs, m = 2 outputs.
X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [2.0, 0.0, 1.0], [1.0, -1.0, 1.0]])
W = np.array([[1.0, 0.0], [2.0, -1.0], [0.0, 1.0]])
G = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0], [1.0, 1.0]])  # dL/dY, as backward hands it over
DATA = {"X": X, "W": W, "G": G}  # the notebook hands these to the learner

register(ArrayExercise(
    key="03-dW",
    question="Y = XW, and backward hands you G = dL/dY. Compute dL/dW as a NumPy array.",
    answer=X.T @ G,
    mistakes=(
        (np.einsum("bi,bj->bij", X, G), "You have one outer product per example, shape (4, 3, 2). W is shared by "
                                         "all examples, so add them up over the batch: that sum is XᵀG."),
        (X.T @ G / 4, "You divided by the batch size. If the loss is a mean, G already carries the 1/B: "
                      "dL/dW is exactly XᵀG."),
        (X @ W, "That is Y, the forward output, not a gradient."),
    ),
    hints=("dL/dW must have the shape of W, (3, 2). Which product of X (4, 3) and G (4, 2) has that shape?",
           "Entry (i, j): W[i, j] multiplies X[b, i] into Y[b, j] for every example b, so "
           "dL/dW[i, j] = Σ_b X[b, i] · G[b, j].",
           "That sum over b is a matrix product with X transposed."),
    solution="dL/dW = X.T @ G: entry (i, j) is Σ_b X[b, i]·G[b, j], summed over the batch; shape (3, 2) like W.",
))

register(ArrayExercise(
    key="03-dX",
    question="Same X, W and G. Compute dL/dX, the gradient that flows on to earlier layers.",
    answer=G @ W.T,
    mistakes=(
        (X @ W, "That is Y, the forward output, not a gradient."),
        (G @ W.T / 4, "You divided by the batch size. If the loss is a mean, G already carries the 1/B: "
                      "dL/dX is exactly GWᵀ."),
        (G @ W.T @ W @ W.T, "One W too many: dL/dX only needs G and Wᵀ."),
    ),
    hints=("dL/dX must have the shape of X, (4, 3). Combine G (4, 2) with W (3, 2) to get it.",
           "Entry (b, i): X[b, i] reaches Y[b, j] through W[i, j], so dL/dX[b, i] = Σ_j G[b, j] · W[i, j]."),
    solution="dL/dX = G @ W.T: entry (b, i) is Σ_j G[b, j]·W[i, j]; shape (4, 3) like X.",
))

register(ArrayExercise(
    key="03-db",
    question="Now Y = XW + b, with b of shape (2,) added to every row. Compute dL/db from G.",
    answer=G.sum(axis=0),
    mistakes=(
        (G, "You kept one gradient per example, shape (4, 2). The same b is added to every row of the batch, "
            "so its gradient is the sum of the rows' gradients."),
        (G.mean(axis=0), "You averaged over the batch. Each row's use of b adds its own contribution: sum them."),
        (G.sum(axis=1), "You summed over the wrong axis: b has one entry per output column, so sum over the rows."),
    ),
    hints=("Broadcasting copied b into every row. A value used several times gets the sum of its contributions.",
           "Sum G over the batch axis, axis 0."),
    solution="dL/db = G.sum(axis=0): b is broadcast to all 4 rows, so its gradient adds up their 4 contributions.",
))

register(NumberExercise(
    key="03-jacobian-bytes",
    question="One example x (1 × 4096) through a 4096 × 4096 layer, y = xW. How many bytes would the explicit "
             "Jacobian dy/dW take in float32?",
    answer=4096 * 4096 * 4096 * 4,
    mistakes={
        4096 * 4096 * 4: "That is the size of W itself. The Jacobian has one row per output (4096) "
                         "and one column per weight (4096·4096).",
        4096 * 4096 * 4096: "That counts the entries; each float32 entry takes 4 bytes.",
        4096 * 4096 * 4096 * 8: "That is float64 (8 bytes an entry); the question asks for float32.",
    },
    hints=("Rows: one per output, 4096. Columns: one per weight, 4096 × 4096.",
           "Entries × 4 bytes."),
    solution="4096 outputs × 16,777,216 weights = 68,719,476,736 entries × 4 bytes = 274,877,906,944 bytes "
             "(about 275 GB), against about 67 MB for W itself.",
    forms=("274877906944", "275e9", "2.75e11", "274.9e9"),
))


# --- code exercises ---------------------------------------------------------------------------------


def linear_backward(X, W, G):
    """Y = XW + b, and G = dL/dY. Return dL/dX, dL/dW and dL/db."""
    dX = G @ W.T                       # each input row reaches every output through W
    rows_X = X.reshape(-1, X.shape[-1])  # a batch of sequences is a batch of rows
    rows_G = G.reshape(-1, G.shape[-1])
    dW = rows_X.T @ rows_G             # W is shared by every row: sum their contributions
    db = rows_G.sum(axis=0)            # b was broadcast to every row: sum over the rows
    return dX, dW, db


def _linear_cases():
    rng = np.random.default_rng(3)
    cases = [Case("hand-checkable", (X, W, G), detail="X_small, W_small, G_small above"),
             Case("one example", (np.array([[1.0, -2.0, 0.5]]), W, np.array([[2.0, 1.0]])))]
    for B, n, m in ((5, 4, 3), (2, 6, 6), (8, 1, 5)):
        cases.append(Case("random", (rng.standard_normal((B, n)), rng.standard_normal((n, m)),
                                     rng.standard_normal((B, m))), detail=f"batch {B}"))
    cases.append(Case("float32", tuple(rng.standard_normal(s).astype(np.float32) for s in ((6, 3), (3, 4), (6, 4)))))
    cases.append(Case("a batch of sequences",
                      (rng.standard_normal((2, 5, 3)), rng.standard_normal((3, 2)), rng.standard_normal((2, 5, 2))), detail="(2, 5, 3) @ (3, 2)",
                      note="here X has three axes, (sequences, positions, inputs): X.T reverses all three. Every "
                           "position of every sequence is one row: X.reshape(-1, X.shape[-1]) makes them rows "
                           "(and G.reshape(-1, G.shape[-1]) likewise)"))
    cases.append(Case("four axes", (rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((5, 3)),
                                    rng.standard_normal((2, 3, 4, 3))), detail="(2, 3, 4, 5) @ (5, 3)",
                      note="here X has four axes (batches, heads, positions, inputs), the shape of attention's "
                           "projections: the same W serves every row whatever the number of leading axes, so dW and "
                           "db sum over all of them. X.reshape(-1, X.shape[-1]) makes rows of any number of axes"))
    cases.append(Case("float32 sequences",
                      tuple(rng.standard_normal(s).astype(np.float32) for s in ((3, 4, 5), (5, 2), (3, 4, 2))),
                      detail="(3, 4, 5) @ (5, 2)"))
    return cases


def _draw_linear(rng, pick):
    """X of the pick's rank (1-D: one example; more: leading batch axes), the pick's values in X or in G."""
    n, m = (int(k) for k in rng.integers(1, 7, 2))
    lead = leading(rng, pick.rank - 1)
    where = "X" if rng.random() < 0.5 else "G"
    X = sample(rng, (*lead, n), pick.values if where == "X" else "mixed", pick.dtype)
    G = sample(rng, (*lead, m), pick.values if where == "G" else "mixed", pick.dtype)
    return Case(DRAWN, (X, sample(rng, (n, m), "mixed", pick.dtype), G),
                detail=f"{pick.said()} in {where}, X {X.shape} @ W {(n, m)}")


register(CodeExercise(
    key="03-linear-backward",
    minutes=15,
    question="Y = XW + b: given X, W and G = dL/dY, return (dL/dX, dL/dW, dL/db), each with the shape of "
             "what it is the gradient of.",
    signature="linear_backward(X, W, G) -> (dX, dW, db)",
    reference=linear_backward,
    cases=_linear_cases,
    outputs=("dX", "dW", "db"),
    domain=Domain(_draw_linear, ranks=(1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("dX", "dW", "db"), size=8),
    slot="linear",
    mistakes=[
        Mistake("the transpose on the wrong side",
                "Gᵀ X has shape (outputs, inputs), the transpose of W. dL/dW[i, j] = Σ_b X[b, i]·G[b, j] is Xᵀ G.",
                lambda X, W, G: (G @ W.T, G.reshape(-1, G.shape[-1]).T @ X.reshape(-1, X.shape[-1]),
                                 G.reshape(-1, G.shape[-1]).sum(0))),
        Mistake("dividing by the batch size",
                "G already holds dL/dY of the loss you differentiate: if that loss is a mean, the 1/B is in G. "
                "The sum over the batch is the whole gradient.",
                lambda X, W, G: (G @ W.T, X.reshape(-1, X.shape[-1]).T @ G.reshape(-1, G.shape[-1]) / len(X),
                                 G.reshape(-1, G.shape[-1]).sum(0) / len(X))),
        Mistake("averaging the bias gradient",
                "b is added to every row, so it receives every row's gradient: sum them (axis 0), do not average.",
                lambda X, W, G: (G @ W.T, X.reshape(-1, X.shape[-1]).T @ G.reshape(-1, G.shape[-1]),
                                 G.reshape(-1, G.shape[-1]).mean(0))),
        Mistake("summing the bias gradient over the wrong axis",
                "b has one entry per output column; its gradient sums over the rows (axis 0), not the columns.",
                lambda X, W, G: (G @ W.T, X.reshape(-1, X.shape[-1]).T @ G.reshape(-1, G.shape[-1]),
                                 G.reshape(-1, G.shape[-1]).sum(-1))),
        Mistake("one weight gradient per sequence",
                "with X of shape (batch, positions, inputs), Xᵀ G per sequence leaves a batch axis on dW. The same "
                "W serves every sequence: flatten the leading axes into rows first "
                "(X.reshape(-1, X.shape[-1]) and G.reshape(-1, G.shape[-1])).",
                lambda X, W, G: (G @ W.T, np.swapaxes(X, -1, -2) @ G, G.reshape(-1, G.shape[-1]).sum(0))),
    ],
    hints=("Each gradient has the shape of what it is the gradient of: dX like X (B, n), dW like W (n, m), db like "
           "b (m,). Which products of X, W and G have those shapes?",
           "dL/dW[i, j] = Σ_b X[b, i]·G[b, j] (sum over the rows), dL/dX[b, i] = Σ_j G[b, j]·W[i, j], and "
           "dL/db[j] = Σ_b G[b, j].",
           "Each of those sums is one matrix product (with one operand transposed) or one sum over an axis. For a "
           "batch of sequences, reshape X and G to rows first (X.reshape(-1, X.shape[-1]), G.reshape(-1, "
           "G.shape[-1])) for dW and db."),
))


def unbroadcast(g, shape):
    """Sum the gradient g down to ``shape``, undoing what broadcasting stretched."""
    while g.ndim > len(shape):           # axes that broadcasting added in front
        g = g.sum(axis=0)
    for axis, size in enumerate(shape):  # axes that were 1 and got stretched
        if size == 1 and g.shape[axis] != 1:
            g = g.sum(axis=axis, keepdims=True)
    return g


def _unbroadcast_cases():
    rng = np.random.default_rng(4)
    g = np.arange(12.0).reshape(4, 3)
    cases = [Case("hand-checkable", (g, (3,)), detail="(4, 3) down to (3,)"),
             Case("hand-checkable", (g, (4, 1)), detail="(4, 3) down to (4, 1)"),
             Case("hand-checkable", (g, (1, 3)), detail="(4, 3) down to (1, 3)"),
             Case("nothing to undo", (g, (4, 3))),
             Case("down to a single number", (g, ()), detail="shape ()"),
             Case("random", (rng.standard_normal((2, 4, 3)), (4, 1)), detail="(2, 4, 3) down to (4, 1)"),
             Case("random", (rng.standard_normal((5, 1, 6)), (1, 1, 6)), detail="(5, 1, 6) down to (1, 1, 6)"),
             Case("float32", (rng.standard_normal((3, 2, 4)).astype(np.float32), (2, 1)), detail="(3, 2, 4) down to (2, 1)"),
             Case("two stretched axes", (rng.standard_normal((3, 4, 5)), (1, 4, 1)), detail="(3, 4, 5) down to (1, 4, 1)",
                  note="both axes of length 1 were stretched: each must be summed, not only the first"),
             Case("an added axis and a stretched one",
                  (rng.standard_normal((2, 3, 4, 5)), (3, 1, 5)), detail="(2, 3, 4, 5) down to (3, 1, 5)")]
    for _ in range(6):  # generated: any number of added leading axes and stretched axes, in any places
        full = tuple(int(n) for n in rng.integers(2, 5, rng.integers(1, 5)))
        kept = full[rng.integers(0, len(full)):]
        shape = tuple(1 if rng.random() < 0.5 else n for n in kept)
        cases.append(Case("generated", (rng.standard_normal(full), shape), detail=f"{full} down to {shape}"))
    return cases


def _draw_unbroadcast(rng, pick):
    """g of the pick's rank (axes of 1 to 4), and a shape it was broadcast from: some leading axes dropped, some of
    the others 1."""
    full = leading(rng, pick.rank)
    kept = full[int(rng.integers(0, len(full) + 1)):]
    shape = tuple(1 if rng.random() < 0.5 else n for n in kept)
    return Case(DRAWN, (sample(rng, full, pick.values, pick.dtype), shape),
                detail=f"{pick.said()}, {full} down to {shape}")


register(CodeExercise(
    key="03-unbroadcast",
    minutes=15,
    refuses=(*guard.BACKWARD, "ops.unbroadcast"),
    question="Broadcasting stretched an input of shape `shape` to the shape of g. Return g summed down to `shape`: "
             "over the axes broadcasting added in front, and over the axes that were 1.",
    signature="unbroadcast(g, shape) -> array of shape `shape`",
    reference=unbroadcast,
    cases=_unbroadcast_cases,
    outputs=("the result",),
    domain=Domain(_draw_unbroadcast, ranks=(1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("the result",), size=8),
    slot="unbroadcast",
    mistakes=[
        Mistake("summing only the added leading axes",
                "an axis of size 1 that broadcasting stretched (a (4, 1) input against (4, 3)) was used 3 times too: "
                "sum over it as well, keeping it as size 1.",
                lambda g, shape: g.sum(axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g),
        Mistake("dropping the size-1 axes",
                "summing a stretched axis without keepdims=True removes it: (4, 3) summed over axis 1 is (4,), but the "
                "input was (4, 1).",
                lambda g, shape: g.sum(axis=tuple(range(g.ndim - len(shape))) + tuple(
                    g.ndim - len(shape) + i for i, n in enumerate(shape) if n == 1 and g.shape[g.ndim - len(shape) + i] != 1))
                if shape else g.sum()),
        Mistake("averaging instead of summing",
                "each copy made by broadcasting contributes its whole gradient, so they add up: sum, do not average.",
                lambda g, shape: np.broadcast_to(g, g.shape).mean(axis=tuple(range(g.ndim - len(shape))) + tuple(
                    g.ndim - len(shape) + i for i, n in enumerate(shape) if n == 1), keepdims=False).reshape(shape)),
    ],
    hints=("Two kinds of axes to undo: the ones broadcasting added in front (g has more axes than shape), and the ones "
           "that were 1 in `shape` but not in g.",
           "Sum over axis 0 while g has too many axes; then, for each axis where shape has a 1 and g does not, sum "
           "with keepdims=True.",),
))


def cross_entropy_forward_backward(logits, targets):
    """The mean softmax cross-entropy of the rows of logits (B, C) with class ids targets (B,): (loss, dL/dlogits)."""
    B = logits.shape[0]
    rows = np.arange(B)
    shifted = logits - logits.max(axis=1, keepdims=True)  # every entry ≤ 0: exp cannot overflow
    log_sum_exp = np.log(np.exp(shifted).sum(axis=1))     # ≥ 0: the sum holds at least one e⁰ = 1
    loss = np.mean(log_sum_exp - shifted[rows, targets])  # −log P[row, target], never log(0)
    P = np.exp(shifted - log_sum_exp[:, None])             # softmax, row by row
    T = np.zeros_like(P)
    T[rows, targets] = 1                                   # one-hot: 1 at each row's target class
    return loss, (P - T) / B


def _quietly(fn):
    """A named mistake run by the checker: NumPy's overflow warnings are the learner's to see, not the course's."""
    def run(logits, targets):
        with np.errstate(all="ignore"):
            return fn(logits, targets)
    return run


def _softmax_rows(logits, axis=1):
    shifted = logits - logits.max(axis=axis, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def _one_hot(P, targets):
    T = np.zeros_like(P)
    T[np.arange(len(targets)), targets] = 1
    return T


def _mean_loss(logits, targets):
    return cross_entropy_forward_backward(logits, targets)[0]


@_quietly
def _naive(logits, targets):
    P = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(P[np.arange(len(targets)), targets]))
    return loss, (P - _one_hot(P, targets)) / len(targets)


@_quietly
def _log_of_probability(logits, targets):
    P = _softmax_rows(logits)
    loss = -np.mean(np.log(P[np.arange(len(targets)), targets]))
    return loss, (P - _one_hot(P, targets)) / len(targets)


@_quietly
def _one_hot_transposed(logits, targets):
    P = _softmax_rows(logits)
    T = np.zeros_like(P)
    T[targets, np.arange(len(targets))] = 1  # row and column swapped: fits only when B = C
    return _mean_loss(logits, targets), (P - T) / len(targets)


@_quietly
def _softmax_down_the_columns(logits, targets):
    P = _softmax_rows(logits, axis=0)
    loss = -np.mean(np.log(P[np.arange(len(targets)), targets]))
    return loss, (P - _one_hot(P, targets)) / len(targets)


def _cross_entropy_cases():
    rng = np.random.default_rng(5)
    hand = np.array([[0.0, 0.0, 0.0], [np.log(3.0), 0.0, 0.0], [0.0, np.log(2.0), np.log(5.0)]])
    cases = [Case("hand-checkable", (hand, np.array([2, 0, 1])),
                  detail="softmax rows (1/3, 1/3, 1/3), (3/5, 1/5, 1/5), (1/8, 2/8, 5/8), targets 2, 0, 1"),
             Case("one example", (np.array([[2.0, -1.0, 0.5, 0.0]]), np.array([3])), detail="B = 1, C = 4")]
    for B, C in ((5, 3), (8, 10), (2, 2)):
        cases.append(Case("random", (rng.standard_normal((B, C)) * 3, rng.integers(0, C, B)), detail=f"B = {B}, C = {C}"))
    cases.append(Case("float32", (rng.standard_normal((6, 5)).astype(np.float32), rng.integers(0, 5, 6))))
    cases.append(Case("int32 targets", (rng.standard_normal((4, 3)), rng.integers(0, 3, 4).astype(np.int32))))
    cases.append(Case("large logits", (np.array([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -999.0]]), np.array([1, 0])),
                      detail="±1000",
                      note="exp(1000) overflows to inf (float64 stops near 1.8e308, about e^709.8) and exp(-1000) "
                           "underflows to 0, so exp(z) / sum(exp(z)) is inf/inf or 0/0 = nan. Subtract each row's "
                           "largest logit first: softmax and the loss do not change, and every exp is at most 1"))
    cases.append(Case("a confident wrong answer", (np.array([[0.0, 800.0], [3.0, 1.0]]), np.array([0, 0])),
                      detail="logits (0, 800), target 0",
                      note="the target's probability is e^-800, which is 0 in float64, and log(0) = -inf; yet the loss "
                           "is a plain 800. Never take the log of a probability: the loss of a row is "
                           "log Σ exp(z − max) − (z[target] − max), and that sum is at least 1"))
    cases.append(Case("a single class", (rng.standard_normal((3, 1)), np.zeros(3, dtype=np.int64)),
                      detail="C = 1: P = 1, loss 0"))
    cases.append(Case("many classes", (rng.standard_normal((4, 1000)) * 5, rng.integers(0, 1000, 4)),
                      detail="B = 4, C = 1000"))
    return cases


def _draw_cross_entropy(rng, pick):
    """B = the pick's count of rows (the mean's denominator), C classes, logits of the pick's values."""
    B, C = pick.count, int(rng.choice([1, 2, 3, 7, 12]))
    targets = rng.integers(0, C, B).astype(np.int32 if rng.random() < 0.5 else np.int64)
    return Case(DRAWN, (sample(rng, (B, C), pick.values, pick.dtype), targets),
                detail=f"{pick.said()}, B = {B}, C = {C}, {targets.dtype} targets")


register(CodeExercise(
    key="03-cross-entropy",
    minutes=20,
    refuses=(*guard.BACKWARD, "nn.cross_entropy"),
    question="Given logits of shape (B, C) and class ids targets of shape (B,), return (loss, dL/dlogits): the mean "
             "cross-entropy over the B rows, computed without overflow, and its gradient.",
    signature="cross_entropy_forward_backward(logits, targets) -> (loss, dlogits)",
    reference=cross_entropy_forward_backward,
    cases=_cross_entropy_cases,
    outputs=("loss", "dlogits"),
    # no keeps_dtype: nothing here promises it, and a one-hot made as np.eye(C)[targets] (float64) is right
    domain=Domain(_draw_cross_entropy, dtypes=(np.float64, np.float32), values=VALUES, counts=(1, 2, 5, 16, 33),
                  size=8),
    slot="cross_entropy",
    mistakes=[
        Mistake("the gradient without the 1/B",
                "the loss is a mean over the B rows, so each row's P − T is divided by B: dL/dlogits = (P − T)/B.",
                _quietly(lambda z, t: (_mean_loss(z, t), _softmax_rows(z) - _one_hot(z, t)))),
        Mistake("the sum over the batch, not the mean",
                "F.cross_entropy averages over the rows (reduction='mean'): divide the summed loss, and the gradient "
                "P − T, by B.",
                _quietly(lambda z, t: (_mean_loss(z, t) * len(t), _softmax_rows(z) - _one_hot(z, t)))),
        Mistake("P without subtracting T",
                "softmax's probabilities alone push every logit down. The first term of ℓ = −z[target] + log Σ exp(z) "
                "gives −1 at the target class: dL/dlogits = (P − T)/B, T the one-hot targets.",
                _quietly(lambda z, t: (_mean_loss(z, t), _softmax_rows(z) / len(t)))),
        Mistake("the one-hot with rows and columns swapped",
                "T[targets, rows] = 1 puts row b's 1 in row targets[b]. T has one row per example: T[rows, targets] = 1 "
                "(np.arange(B) for the rows).",
                _one_hot_transposed),
        Mistake("the softmax taken down the columns",
                "each row is one example's logits over the C classes: take the max and the sum along axis 1 "
                "(keepdims=True), not axis 0.",
                _softmax_down_the_columns),
        Mistake("the naive forward, which overflows",
                "exp of a logit of 1000 is inf, and inf/inf is nan. Subtract each row's largest logit first: "
                "softmax and the loss do not change, and no exp can overflow.",
                _naive),
        Mistake("the log of a probability that underflowed",
                "the max is subtracted, but log(P[target]) is log(0) = -inf when that probability is too small for "
                "float64 (e^-800 is 0 there). Write the loss as log Σ exp(z − max) − (z[target] − max): the log of a sum that is at least 1.",
                _log_of_probability),
    ],
    hints=("One row's loss is ℓ = −z[target] + log Σ_j exp(z_j). Subtract the row's largest logit m from every logit "
           "first: softmax and ℓ stay the same, and no exp can overflow.",
           "log Σ_j exp(z_j) = m + log Σ_j exp(z_j − m), the log-sum-exp. So ℓ = log Σ_j exp(z_j − m) − (z[target] − m), "
           "and the loss is the mean of ℓ over the rows.",
           "The gradient is (P − T) / B: P = exp(shifted − log_sum_exp) row by row, T the one-hot targets "
           "(zeros, then a 1 at [np.arange(B), targets]), B the number of rows."),
))


# --- code exercise: your own gradient checker (the companion) --------------------------------------------


def grad_check(f, x, grad, coords, h, *, sided="central", error="relative", restore=True, step=2):
    """The relative error of ``grad`` (the backward's gradient of f at x) against a central difference of f, at each
    index in ``coords``. Each keyword, changed from its default, makes one mistake of the checker's table."""
    errors, moved = [], x.copy()
    for i in coords:
        plus, minus = (x.copy(), x.copy()) if restore else (moved, moved)
        plus[i] += h
        f_plus = f(plus)
        minus[i] -= h if restore else 2 * h  # without restoring: from x + h down to x − h, and left there
        f_minus = f(minus)
        numeric = ((f_plus - f(x)) / h if sided == "forward" else (f(x) - f_minus) / h if sided == "backward"
                   else (f_plus - f_minus) / (step * h))
        a = grad[i]
        if error == "absolute":
            errors.append(abs(a - numeric))
            continue
        scale = {"relative": max(abs(a), abs(numeric)), "over-backward": abs(a), "sum": abs(a) + abs(numeric)}[error]
        errors.append(abs(a - numeric) / scale if scale else 0.0)
    return np.array(errors, dtype=np.float64)


GRAD_CHECK_SOLUTION = '''\
def grad_check(f, x, grad, coords, h):
    """At each index i in coords: the relative error of grad[i] against (f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h."""
    errors = []
    for i in coords:
        plus, minus = x.copy(), x.copy()   # copies: x itself stays as it is
        plus[i] += h
        minus[i] -= h
        numeric = (f(plus) - f(minus)) / (2 * h)
        scale = max(abs(grad[i]), abs(numeric))
        errors.append(abs(grad[i] - numeric) / scale if scale else 0.0)
    return np.array(errors)
'''


def _draw_grad_check(rng, pick):
    """draw(rng, pick) for 03-grad-check: f(x) = Σ tanh(a·x)·b + Σ c·x² of an x of the pick's rank and kind, its
    right gradient with one entry made wrong, ``pick.count`` coordinates, and a step of the pick's threshold."""
    shape = leading(rng, pick.rank, low=2, high=4)
    x = sample(rng, shape, pick.values)
    a, b, c = (rng.standard_normal(shape) for _ in range(3))

    def f(x):
        return float(np.sum(np.tanh(a * x) * b) + np.sum(c * x * x))

    grad = a * b * (1 - np.tanh(a * x) ** 2) + 2 * c * x
    wrong = tuple(int(rng.integers(n)) for n in shape)
    grad[wrong] *= 1.5
    every = list(np.ndindex(*shape))
    coords = [every[i] for i in rng.choice(len(every), size=min(pick.count, len(every)), replace=False)]
    return Case(DRAWN, (f, x, grad, coords, pick.threshold),
                detail=f"x of shape {shape}, {pick.said()}, {len(coords)} coordinates, h = {pick.threshold:g}")


def _grad_check_cases():
    rng = np.random.default_rng(34)

    def cubes(x):
        return float(np.sum(x**3))

    X, C = rng.standard_normal((5, 3)), rng.standard_normal((5, 4))

    def layer(W):
        return float(np.sum(np.tanh(X @ W) * C))

    W = rng.standard_normal((3, 4)) * 0.5
    right = X.T @ (C * (1 - np.tanh(X @ W) ** 2))
    planted = right.copy()
    planted[1, 2] *= 1.5  # one entry wrong
    W_coords = [(1, 2), (0, 0), (2, 3), (0, 1), (1, 0)]

    def big(W):
        return 1000.0 * layer(W)

    def small(W):
        return 1e-6 * layer(W)

    def unused_input(x):
        return float(x[0] ** 2 + np.sin(x[1]))  # x[2] is not used: its gradient is 0, and so is the difference

    x3 = np.array([0.5, -1.0, 2.0])
    return [Case("hand-checkable", (cubes, x3, np.array([0.75, 2.0, 12.0]), [(0,), (1,), (2,)], 1e-6),
                 detail="f = Σ x³ at x = (0.5, -1, 2); grad (0.75, 2, 12), whose middle entry should be 3"),
            Case("a matrix input", (layer, W, planted, W_coords, 1e-6),
                 detail="f(W) = Σ tanh(XW)·C, W of shape (3, 4), one planted wrong entry at (1, 2)"),
            Case("a large function", (big, W, right * 1000.0, W_coords, 1e-6),
                 detail="1000 × the same f, a right gradient",
                 note="a right gradient of a large function differs from its finite difference by more, in plain "
                      "numbers, than a small one does: that is why the error is relative"),
            Case("a tiny function", (small, W, planted * 1e-6, W_coords, 1e-6),
                 detail="1e-6 × the same f, the planted wrong entry",
                 note="the wrong entry is off by 1e-7 or so in plain numbers, and by a third of its size"),
            Case("a zero gradient", (unused_input, x3, np.array([1.0, 0.0, 0.0]), [(0,), (1,), (2,)], 1e-6),
                 detail="f = x₀² + sin x₁; grad says 0 for x₁ (wrong: cos(-1) = 0.54) and 0 for the unused x₂ (right)",
                 note="where both the backward and the difference are 0 the error is 0; where only the backward is 0, "
                      "it is 1"),
            Case("a large step", (layer, W, right, W_coords, 0.1),
                 detail="h = 0.1: the central difference is off by about h², a one-sided one by about h")]


register(CodeExercise(
    key="03-grad-check",
    minutes=12,
    question="Write grad_check(f, x, grad, coords, h): for each index i in coords (tuples, so x[i] works whatever "
             "x's shape), the central difference (f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h, where eᵢ moves entry i alone, "
             "and the relative error of grad[i] against it, |a − n| / max(|a|, |n|) (0 when both are 0). Return "
             "the errors as an array, in the order of coords. f takes an array like x and returns a float; x stays "
             "unchanged.",
    signature="grad_check(f, x, grad, coords, h) -> relative errors (one per coordinate)",
    reference=grad_check,
    solution_code=GRAD_CHECK_SOLUTION,
    cases=_grad_check_cases,
    domain=Domain(_draw_grad_check, ranks=(1, 2, 3), values=("mixed", "negative", "zero"), counts=(1, 3, 6),
                  thresholds=(1e-4, 1e-5, 1e-6), size=6),
    outputs=("the relative errors",),
    in_place=("x is the caller's array, and f may still be reading it: nudge a copy (plus = x.copy(); plus[i] += h), "
              "never x itself, even if you put it back afterwards"),
    rtol=1e-6,
    atol=1e-8,  # a right entry's error is rounding, about 1e-10 here, and differs with the order of operations
    mistakes=[
        Mistake("a one-sided difference",
                "(f(x + h·eᵢ) − f(x)) / h is off by about h times the curvature; the central difference "
                "(f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h by about h², far less for the same h.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, sided="forward")),
        Mistake("a one-sided difference, from below",
                "(f(x) − f(x − h·eᵢ)) / h is one-sided too, from the other side: off by about h times the curvature. "
                "The central difference (f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h is off by about h², far less for the same h.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, sided="backward")),
        Mistake("h in place of 2h",
                "the two points x + h·eᵢ and x − h·eᵢ are 2h apart: divide their difference by 2h, or every "
                "difference comes out twice its size and every right gradient looks wrong by a half.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, step=1)),
        Mistake("the absolute error",
                "|a − n| on its own depends on the gradient's size: 1e-7 is a bug in a gradient of 1e-7 and noise "
                "in one of 1000. Divide by max(|a|, |n|).",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, error="absolute")),
        Mistake("divided by the backward's value alone",
                "|a − n| / |a| is infinite where the backward says 0 and the function does move, the very bug to "
                "find. Divide by max(|a|, |n|), and return 0 when both are 0.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, error="over-backward")),
        Mistake("|a| + |n| in the denominator",
                "dividing by the sum is a convention of its own, at about half the scale; the question asks for "
                "max(|a|, |n|), the convention of the rules of thumb below.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, error="sum")),
        Mistake("the nudge not undone",
                "nudging one copy of x and never moving it back leaves every earlier coordinate at x − h while the "
                "next is measured: each difference is taken at a point that drifts away from x. Start each "
                "coordinate from a fresh copy of x.",
                lambda f, x, grad, coords, h: grad_check(f, x, grad, coords, h, restore=False)),
    ],
    hints=("For each i: plus = x.copy(); plus[i] += h; the same for minus with −h. Copies, so that x stays as it is "
           "and the next coordinate starts from x again.",
           "numeric = (f(plus) − f(minus)) / (2 * h); scale = max(abs(grad[i]), abs(numeric)); the error is "
           "abs(grad[i] − numeric) / scale, or 0 when scale is 0."),
))
