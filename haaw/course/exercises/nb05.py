"""Exercises of notebook 05: softmax and attention."""
import numpy as np

from .core import Exercise, register

register(Exercise(
    key="05-softmax-grad",
    question="Softmax outputs s = (0.5, 0.3, 0.2) and the upstream gradient is g = (1, 0, 0). "
             "What is dL/dz₁, the gradient for the first logit?",
    answer=0.25,
    mistakes={
        0.5: "0.5 is s₁·g₁. Every output depends on every logit: subtract s₁·⟨g, s⟩ as well.",
        1: "1 would pass g straight through, as if softmax were the identity.",
        0.75: "0.75 is 1 − s₁ alone; it still has to be multiplied by s₁.",
    },
    hints=("The vector form: dL/dz = s ⊙ (g − ⟨g, s⟩).", "⟨g, s⟩ = 1·0.5 + 0 + 0 = 0.5."),
    solution="dL/dz₁ = s₁ (g₁ − ⟨g, s⟩) = 0.5 × (1 − 0.5) = 0.25.",
))

register(Exercise(
    key="05-score-variance",
    question="q and k have d_k = 64 independent entries of mean 0 and variance 1. What is the variance of "
             "the unscaled score q·k?",
    answer=64,
    mistakes={
        8: "8 is the standard deviation, √64. The variance adds up: 64 terms of variance 1.",
        1: "1 is the variance *after* dividing by √d_k; the question asks about the unscaled score.",
        4096: "4096 = 64²: each term qᵢkᵢ has variance 1·1 = 1, and there are 64 terms.",
    },
    hints=("Each product qᵢkᵢ has mean 0 and variance 1.", "Variances of independent terms add."),
    solution="64 terms of variance 1 add up to 64 (standard deviation 8); dividing by √64 = 8 brings it back to 1.",
))

P = np.array([[1.0, 0.0], [0.25, 0.75]])  # attention weights: 2 queries × 2 keys
G = np.array([[1.0, -1.0, 2.0], [0.0, 4.0, 1.0]])  # dL/dO, 2 queries × 3 features
register(Exercise(
    key="05-dV",
    question="O = P V with attention weights P (2 × 2) and values V (2 × 3). Given G = dL/dO, compute dL/dV.",
    answer=P.T @ G,
    mistakes=(
        (P @ G, "P G mixes the wrong way: value j collects from every query that looked at it, weighted "
                "by P[query, j], so transpose P: PᵀG."),
        (G, "G is dL/dO. V reaches O only through the attention weights: multiply by Pᵀ."),
    ),
    hints=("This is Y = XW again, with P in the role of X and V in the role of W.", "dL/dW = XᵀG."),
    solution="dL/dV = Pᵀ G: row j gathers the output gradients of all queries, weighted by how much each attended to key j.",
    data={"P": P, "G": G},
))
