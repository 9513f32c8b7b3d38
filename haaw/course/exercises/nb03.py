"""Exercises of notebook 03: matrices, Y = XW."""
import numpy as np

from .core import Exercise, register

# Small integers, so the products can be done by hand; B = 4 examples, n = 3 inputs, m = 2 outputs.
X = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [2.0, 0.0, 1.0], [1.0, -1.0, 1.0]])
W = np.array([[1.0, 0.0], [2.0, -1.0], [0.0, 1.0]])
G = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0], [1.0, 1.0]])  # dL/dY, as backward hands it over
DATA = {"X": X, "W": W, "G": G}

register(Exercise(
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
    data=DATA,
))

register(Exercise(
    key="03-dX",
    question="Same X, W and G. Compute dL/dX, the gradient that flows on to earlier layers.",
    answer=G @ W.T,
    mistakes=(
        (X @ W, "That is Y, the forward output, not a gradient."),
        (G @ W.T @ W @ W.T, "One W too many: dL/dX only needs G and Wᵀ."),
    ),
    hints=("dL/dX must have the shape of X, (4, 3). Combine G (4, 2) with W (3, 2) to get it.",
           "Entry (b, i): X[b, i] reaches Y[b, j] through W[i, j], so dL/dX[b, i] = Σ_j G[b, j] · W[i, j]."),
    solution="dL/dX = G @ W.T: entry (b, i) is Σ_j G[b, j]·W[i, j]; shape (4, 3) like X.",
    data=DATA,
))

register(Exercise(
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
    data=DATA,
))

register(Exercise(
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
             "(about 275 GB), against 64 MiB for W itself.",
))
