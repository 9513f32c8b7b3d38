"""Exercises of notebook 05: softmax and attention."""
import tracemalloc

import numpy as np

from ...engine import guard
from ...engine.plugins import read_only
from ..nb05 import network_forward
from .code import Case, CodeExercise, LearnerError, Mistake
from .core import ArrayExercise, NumberExercise, register
from .domain import DRAWN, VALUES, Domain, leading, sample

register(NumberExercise(
    key="05-softmax-grad",
    question="Softmax outputs s = (0.5, 0.3, 0.2) and the upstream gradient is g = (1, 0, 0): the loss depends "
             "on the first weight only. What is dL/dz₂, the gradient for the second logit?",
    answer=-0.15,
    mistakes={
        0: "0 would be right if each weight depended on its own logit only (s ⊙ g, or a sigmoid's slope "
           "s₂(1 − s₂) times g₂ = 0). But raising z₂ also lowers s₁, which the loss does depend on: the "
           "off-diagonal entry ∂s₁/∂z₂ = −s₁s₂ carries g₁ to z₂.",
        -0.5: "−0.5 is g₂ − ⟨g, s⟩; the vector form multiplies it by s₂ as well.",
        -0.3: "−0.3 is −s₂·g₁; the Jacobian's entry is ∂s₁/∂z₂ = −s₁s₂, so multiply by s₁ = 0.5 as well.",
        0.25: "0.25 is dL/dz₁, the first logit's gradient; the question asks for the second, z₂.",
        -0.06: "−0.06 is −s₂·s₃; the loss depends on s₁, so the entry that matters is ∂s₁/∂z₂ = −s₁s₂.",
    },
    hints=("Raising z₂ raises s₂ but lowers the other weights, s₁ among them, and s₁ is what the loss depends on. "
           "The vector form: dL/dz = s ⊙ (g − ⟨g, s⟩).",
           "⟨g, s⟩ = 1·0.5 + 0·0.3 + 0·0.2 = 0.5; then dL/dz₂ = s₂ (g₂ − 0.5)."),
    solution="dL/dz₂ = s₂ (g₂ − ⟨g, s⟩) = 0.3 × (0 − 0.5) = -0.15. It is the Jacobian's off-diagonal entry "
             "∂s₁/∂z₂ = −s₁s₂ = −0.15 times g₁ = 1: raising z₂ takes weight away from s₁. Keeping only the "
             "diagonal would give 0.",
))

register(NumberExercise(
    key="05-score-variance",
    question="q and k have d_k = 64 independent entries of mean 0 and variance 1. What is the variance of "
             "the unscaled score q·k? (The exact value, not an estimate from random samples.)",
    answer=64,
    mistakes={
        8: "8 is the standard deviation, √64. The variance adds up: 64 terms of variance 1.",
        1: "1 is the variance *after* dividing by √d_k; the question asks about the unscaled score.",
        4096: "4096 = 64²: each term qᵢkᵢ has variance 1·1 = 1, and there are 64 terms.",
        65.4: "65.4 is the notebook's estimate from 4000 random pairs (q, k): a sample's variance scatters "
              "around the exact one by a few percent. The exact value follows from adding up the 64 terms.",
    },
    hints=("Each product qᵢkᵢ has mean 0 and variance 1.", "Variances of independent terms add."),
    solution="64 terms of variance 1 add up to 64 (standard deviation 8); dividing by √64 = 8 brings it back to 1. "
             "The notebook's 65.4 is an estimate of it from 4000 samples.",
))

P = np.array([[1.0, 0.0], [0.25, 0.75]])  # attention weights: 2 queries × 2 keys
G = np.array([[1.0, -1.0, 2.0], [0.0, 4.0, 1.0]])  # dL/dO, 2 queries × 3 features
register(ArrayExercise(
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
))


# --- code exercises: softmax's backward without its Jacobian, and attention's --------------------------


def softmax_backward(s, G):
    """s = softmax(z) along the last axis, G = dL/ds. Return dL/dz, without building the Jacobian."""
    return s * (G - np.sum(G * s, axis=-1, keepdims=True))  # s ⊙ (G − ⟨G, s⟩), row by row


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


LONG = 2_000  # rows of this many weights or more run with their memory watched: a Jacobian there is 32 MB a row
VERY_LONG = 20_000  # the longest rows: 3.2 GB a row for a Jacobian, milliseconds for the vector form
JACOBIAN = ("building the Jacobian (a row-length × row-length matrix) is what this exercise asks you to avoid: the "
            "product needs only s and G")


def _run_softmax(fn, s, G):
    """``fn`` on read-only copies of s and G; on long rows, with the memory it allocates watched (tracemalloc
    sees NumPy's arrays). s ⊙ (G − ⟨G, s⟩) needs a few arrays the size of s; a Jacobian needs row-length² numbers
    a row (32 MB for a row of 2,000 weights), so code that builds one is refused at the long rows, on numbers it
    can still afford, before the very long ones, where one Jacobian would take gigabytes."""
    args = read_only(s, copy=True), read_only(G, copy=True)
    n = s.shape[-1] if s.ndim else 0
    if n < LONG:
        return fn(*args)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()  # where tracing was on already, only its peak is reset
        result = fn(*args)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()
    one = n * n * s.itemsize  # one row's Jacobian
    if peak > one / 4:
        raise LearnerError(f"{JACOBIAN}. For {s.size // n} rows of {n:,} weights ({s.nbytes / 1e3:,.0f} kB in s) your "
                           f"function needed {peak / 1e6:,.0f} MB at once, and one {n:,} × {n:,} Jacobian is "
                           f"{one / 1e6:,.0f} MB; rows of {VERY_LONG:,} weights, as in the next case, would need "
                           f"{VERY_LONG ** 2 * s.itemsize / 1e9:.1f} GB a row. Apply diag(s) − s sᵀ to G without "
                           "building it: diag(s) G is s * G, and s sᵀ G is s times one number per row, ⟨G, s⟩")
    return result


def _softmax_cases():
    rng = np.random.default_rng(7)
    return [Case("hand-checkable", (np.array([1 / 6, 1 / 3, 1 / 2]), np.array([1.0, 0.0, 2.0])), detail="one row, s = (1/6, 1/3, 1/2)"),
            Case("a batch of rows", (_softmax(rng.standard_normal((4, 5))), rng.standard_normal((4, 5))), detail="(4, 5)"),
            Case("attention's shape", (_softmax(rng.standard_normal((2, 3, 4, 4))),
                                                     rng.standard_normal((2, 3, 4, 4))), detail="(2, 3, 4, 4)"),
            Case("float32", (_softmax(rng.standard_normal((3, 6))).astype(np.float32),
                             rng.standard_normal((3, 6)).astype(np.float32))),
            Case("saturated rows", (_softmax(rng.standard_normal((3, 5)) * 40), rng.standard_normal((3, 5))), detail="one weight near 1"),
            Case("masked entries", (np.array([[0.25, 0.0, 0.75], [0.0, 0.0, 0.0]]), np.ones((2, 3))), detail="weights exactly 0",
                 note="a masked entry has weight 0 and must get gradient 0; a fully masked row gets 0 everywhere"),
            Case("long rows", (_softmax(rng.standard_normal((2, LONG))), rng.standard_normal((2, LONG))),
                 detail=f"2 rows of {LONG:,} weights",
                 note=f"one {LONG:,} × {LONG:,} Jacobian takes {LONG * LONG * 8 / 1e6:.0f} MB: the vector form never "
                      "makes anything larger than s"),
            Case("very long rows", (_softmax(rng.standard_normal((3, VERY_LONG))), rng.standard_normal((3, VERY_LONG))),
                 detail=f"3 rows of {VERY_LONG:,} weights",
                 note=f"one {VERY_LONG:,} × {VERY_LONG:,} Jacobian takes {VERY_LONG ** 2 * 8 / 1e9:.1f} GB; "
                      "s ⊙ (G − ⟨G, s⟩) takes a millisecond")]


def _draw_softmax(rng, pick):
    """s of the pick's rank: rows of 1 to 40 weights, softmax of random logits. The pick's values: huge, logits so
    spread that each row is one weight of 1 (saturated); zero, rows with masked weights, exactly 0 (some rows all
    0); tiny, negative and mixed, in G."""
    shape = leading(rng, pick.rank, last=(int(rng.integers(1, 41)),))
    z = sample(rng, shape, "huge" if pick.values == "huge" else "mixed")
    s = _softmax(z)
    if pick.values == "zero":
        kept = rng.random(shape) < 0.6
        s = np.where(kept, s, 0.0)
        total = s.sum(axis=-1, keepdims=True)
        s = np.divide(s, total, out=np.zeros_like(s), where=total > 0)  # a row with nothing kept: all 0
    G = sample(rng, shape, pick.values if pick.values in ("tiny", "negative", "mixed") else "mixed", pick.dtype)
    return Case(DRAWN, (s.astype(pick.dtype), G), detail=f"{pick.said()}, shape {shape}")


register(CodeExercise(
    key="05-softmax-backward",
    minutes=15,
    question="Write softmax's backward in vector form: given s = softmax(z) along the last axis and G = dL/ds, "
             "return dL/dz = s ⊙ (G − ⟨G, s⟩), the inner product taken row by row. Do not build the Jacobian.",
    signature="softmax_backward(s, G) -> dz",
    reference=softmax_backward,
    cases=_softmax_cases,
    outputs=("dz",),
    run=_run_softmax,
    domain=Domain(_draw_softmax, ranks=(1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("dz",), size=8),
    too_slow=(f"{JACOBIAN}, and the very long rows have {VERY_LONG:,} weights: a Jacobian of {VERY_LONG ** 2 / 1e6:,.0f} "
              f"million entries, {VERY_LONG ** 2 * 8 / 1e9:.1f} GB, a row. If your code builds no Jacobian, look for a "
              "Python loop over the entries where one NumPy operation would do."),
    slot="softmax",
    mistakes=[
        Mistake("only the diag(s) part of the Jacobian",
                "s ⊙ G is diag(s) G: it keeps the first term of the Jacobian diag(s) − s sᵀ and drops the second, "
                "−s sᵀ G. Every weight depends on every logit (they must sum to 1), so that term is needed too: "
                "s ⊙ (G − ⟨G, s⟩).",
                lambda s, G: s * G),
        Mistake("the sum of G instead of ⟨G, s⟩",
                "the correction is the average of G weighted by s, Σ_j G_j s_j, not the plain sum Σ_j G_j.",
                lambda s, G: s * (G - G.sum(axis=-1, keepdims=True))),
        Mistake("the leading s forgotten", "dz = s ⊙ (G − ⟨G, s⟩): multiply by s at the end.",
                lambda s, G: G - np.sum(G * s, axis=-1, keepdims=True)),
        Mistake("one inner product over everything",
                "each row is its own softmax: take ⟨G, s⟩ along the last axis (axis=-1, keepdims=True), not over "
                "the whole array.",
                lambda s, G: s * (G - np.sum(G * s))),
        Mistake("only the diagonal of the Jacobian (a sigmoid's slope)",
                "s ⊙ (1 − s) ⊙ G keeps only the Jacobian's diagonal, ∂s_i/∂z_i = s_i(1 − s_i), which has the form "
                "of a sigmoid's slope. A softmax weight also moves when the *other* logits move: the off-diagonal "
                "entries −s_i s_j are needed too, and the vector form s ⊙ (G − ⟨G, s⟩) includes them.",
                lambda s, G: s * (1 - s) * G),
    ],
    hints=("The Jacobian is diag(s) − s sᵀ. Apply it to G without building it: diag(s) G is s * G, and s sᵀ G is "
           "s times one number per row, ⟨G, s⟩.",
           "⟨G, s⟩ per row is np.sum(G * s, axis=-1, keepdims=True)."),
))


ATTENTION_SOLUTION = '''\
def attention_backward(Q, K, V, mask, G):
    """O = softmax(Q Kᵀ / √d, masked) V. Given G = dL/dO, return dL/dQ, dL/dK, dL/dV.

    ``mask`` is None or boolean, True where a query may look at a key; a query that may look at
    nothing gets output 0 and gradient 0."""
    scale = Q.shape[-1] ** -0.5  # 1/√d as a Python float: float32 inputs stay float32 (np.sqrt(d) would not)
    S = Q @ np.swapaxes(K, -1, -2) * scale
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    top = np.max(S, axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))          # a fully masked row: all zeros
    total = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
    dV = np.swapaxes(P, -1, -2) @ G                              # O = P V
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))       # softmax's backward
    dQ = dS @ K * scale                                          # S = Q Kᵀ / √d
    dK = np.swapaxes(dS, -1, -2) @ Q * scale
    return dQ, dK, dV
'''


def attention_backward(Q, K, V, mask, G, *, scale=True, dv_transposed=False, dk_transposed=False, mask_used=True):
    """The reference: O = softmax(Q Kᵀ / √d, masked) V; given G = dL/dO, dL/dQ, dL/dK, dL/dV (the learner sees
    ATTENTION_SOLUTION). Each keyword, changed from its default, makes one mistake of the checker's table."""
    one_over_root_d = Q.shape[-1] ** -0.5  # a Python float: float32 inputs stay float32
    S = Q @ np.swapaxes(K, -1, -2) * one_over_root_d
    if mask is not None and mask_used:
        S = np.where(mask, S, -np.inf)
    top = np.max(S, axis=-1, keepdims=True)
    E = np.exp(S - np.where(np.isfinite(top), top, 0))          # a fully masked row: all zeros
    total = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, total, out=np.zeros_like(E), where=total > 0)
    dV = (P if dv_transposed else np.swapaxes(P, -1, -2)) @ G
    dP = G @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True))
    k = one_over_root_d if scale else 1.0
    dQ = dS @ K * k
    dK = (dS if dk_transposed else np.swapaxes(dS, -1, -2)) @ Q * k
    return dQ, dK, dV


def _attention_variant(**mistake):
    return lambda Q, K, V, mask, G: attention_backward(Q, K, V, mask, G, **mistake)


def _attention_cases():
    rng = np.random.default_rng(8)
    causal = np.tril(np.ones((4, 4), dtype=bool))
    empty = causal.copy()
    empty[2] = False
    return [Case("hand-checkable", (np.array([[1.0, 0.0], [0.0, 1.0]]),
                 np.array([[1.0, 1.0], [0.0, 2.0]]), np.array([[1.0, 2.0], [3.0, 4.0]]), None, np.ones((2, 2))), detail="2 queries, 2 keys, d = 2, no mask"),
            Case("no mask", tuple(rng.standard_normal((4, 3)) for _ in range(3)) + (None, rng.standard_normal((4, 3))), detail="T = 4, d = 3"),
            Case("a causal mask", tuple(rng.standard_normal((4, 3)) for _ in range(3)) + (causal, rng.standard_normal((4, 3)))),
            Case("a fully masked query (row 2)", tuple(rng.standard_normal((4, 3)) for _ in range(3)) + (empty, rng.standard_normal((4, 3))),
                 note="query 2 may look at nothing: its output is 0, and its gradient must be 0, not nan"),
            Case("batch and heads", tuple(rng.standard_normal((2, 2, 4, 8)) for _ in range(3)) + (causal, rng.standard_normal((2, 2, 4, 8))), detail="(2, 2, 4, 8)"),
            Case("float32", tuple(rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3)) + (None, rng.standard_normal((4, 3)).astype(np.float32))),
            Case("3 queries", (rng.standard_normal((3, 4)), rng.standard_normal((5, 4)),
                 rng.standard_normal((5, 2)), None, rng.standard_normal((3, 2))), detail="5 keys, d_k = 4, values of d_v = 2",
                 note="queries and keys differ in number, and values in width: 1/√d_k comes from the keys' width"),
            Case("large scores", (rng.standard_normal((4, 3)) * 30, rng.standard_normal((4, 3)) * 30,
                                  rng.standard_normal((4, 3)), None, rng.standard_normal((4, 3))),
                 detail="scores up to about ±1,000, no mask",
                 note="e to the power of a score near 1,000 overflows: subtract each row's own largest score before "
                      "the exponential, as a stable softmax does (a shift by one number for all rows is not enough "
                      "when the rows' scores lie far apart)")]


def _draw_attention(rng, pick):
    """Q (T, d_k), K (S, d_k), V (S, d_v) and G (T, d_v) with the pick's rank (leading batch and head axes), T, S,
    d_k and d_v drawn apart; the pick's values in the queries and keys (huge: scores far apart), in V or in G; a mask
    that is None, causal, random, random with a query that may look at nothing, or one of shape (T, S) shared by
    every batch and head."""
    T, S, dk, dv = (int(n) for n in rng.integers(1, 6, 4))
    lead = leading(rng, pick.rank - 2, high=3)
    where = str(rng.choice(["Q and K", "V", "G"]))
    kind = {w: pick.values if w == where else "mixed" for w in ("Q and K", "V", "G")}
    Q = sample(rng, (*lead, T, dk), kind["Q and K"], pick.dtype)
    K = sample(rng, (*lead, S, dk), kind["Q and K"], pick.dtype)
    V, G = sample(rng, (*lead, S, dv), kind["V"], pick.dtype), sample(rng, (*lead, T, dv), kind["G"], pick.dtype)
    masks = {"no mask": None, "a causal mask": np.tril(np.ones((T, S), dtype=bool)),
             "a random mask": rng.random((*lead, T, S)) < 0.6}
    empty = rng.random((*lead, T, S)) < 0.6
    empty[..., int(rng.integers(T)), :] = False
    masks["a random mask, one query masked entirely"] = empty
    masks["a random mask shared by every batch and head"] = rng.random((T, S)) < 0.6
    said = str(rng.choice(list(masks)))
    return Case(DRAWN, (Q, K, V, masks[said], G),
                detail=f"{pick.said()} in {where}, T = {T}, S = {S}, d_k = {dk}, d_v = {dv}, leading axes {lead}, "
                       f"{said}")


register(CodeExercise(
    key="05-attention-backward",
    minutes=30,
    question="Write attention's backward: O = P V with P = softmax(S) row by row and S = Q Kᵀ / √d_k, where masked "
             "entries (mask False) get weight 0 and a fully masked query gets output 0. Given G = dL/dO, return "
             "(dL/dQ, dL/dK, dL/dV). Arrays may have leading batch and head axes.",
    signature="attention_backward(Q, K, V, mask, G) -> (dQ, dK, dV)",
    reference=attention_backward,
    solution_code=ATTENTION_SOLUTION,
    cases=_attention_cases,
    outputs=("dQ", "dK", "dV"),
    domain=Domain(_draw_attention, ranks=(2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("dQ", "dK", "dV"), size=8),
    slot="attention",
    mistakes=[
        Mistake("the scale forgotten in backward",
                "S = Q Kᵀ / √d_k, so the 1/√d_k multiplies dQ and dK too: the chain rule passes through the division.",
                _attention_variant(scale=False)),
        Mistake("dV = P G",
                "O = P V: V's gradient is Pᵀ G (keys on the rows), the transpose on the left.",
                _attention_variant(dv_transposed=True)),
        Mistake("dK = dS Q",
                "dS has queries on its rows and keys on its columns. K's gradient needs keys on the rows: dSᵀ Q.",
                _attention_variant(dk_transposed=True)),
        Mistake("the mask ignored in backward",
                "the forward gave masked entries weight 0; the backward must use the same masked weights P, or "
                "gradient flows to keys a query never looked at.",
                _attention_variant(mask_used=False)),
    ],
    hints=("Go backwards one step at a time: O = P V gives dV and dP; the softmax gives dS from dP (your "
           "softmax_backward, row by row); S = Q Kᵀ/√d_k gives dQ and dK.",
           "O = P V is notebook 03's Y = XW with P as X and V as W: dV and dP are its two products, one factor "
           "transposed. S = Q Kᵀ · (1/√d_k) is that product again, with the scale carried into both gradients and Kᵀ "
           "transposed back. Build P with the mask, and make a fully masked row all zeros instead of 0/0.",
           "For batch axes use np.swapaxes(A, -1, -2) for a transpose, and keep the row sums along axis -1. "
           "Keep 1/√d_k a Python float, as the template's d_k ** -0.5 is: np.sqrt(d_k) is a NumPy float64 scalar, "
           "and multiplying a float32 array by it gives float64."),
))


# --- code exercise: LayerNorm's backward ---------------------------------------------------------------


def _layer_norm_parts(x, eps):
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    return mu, sigma, (x - mu) / sigma


def _batch_sums(G, x_hat):
    """dweight and dbias: a weight is used by every row, so its gradient sums over every axis but the last."""
    rows = tuple(range(G.ndim - 1))
    return (G * x_hat).sum(axis=rows), G.sum(axis=rows)


def layer_norm_backward(x, weight, G, eps=1e-5):
    """y = x̂ · weight + bias, x̂ = (x − μ)/σ over the last axis, σ = √(variance + eps). Return (dx, dweight, dbias)."""
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    x_hat = (x - mu) / sigma
    g = G * weight                                   # the gradient reaching x̂
    dx = (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / sigma
    rows = tuple(range(G.ndim - 1))                  # every axis but the last: the weight serves every row
    dweight = (G * x_hat).sum(axis=rows)
    dbias = G.sum(axis=rows)
    return dx, dweight, dbias


def _ln_constant_mean_and_sigma(x, weight, G, eps=1e-5):
    _, sigma, x_hat = _layer_norm_parts(x, eps)
    return (G * weight / sigma, *_batch_sums(G, x_hat))


def _ln_no_projection(x, weight, G, eps=1e-5):
    _, sigma, x_hat = _layer_norm_parts(x, eps)
    g = G * weight
    return ((g - g.mean(axis=-1, keepdims=True)) / sigma, *_batch_sums(G, x_hat))


def _ln_unsummed(x, weight, G, eps=1e-5):
    dx = layer_norm_backward(x, weight, G, eps)[0]
    _, _, x_hat = _layer_norm_parts(x, eps)
    return dx, G * x_hat, G


def _ln_eps_outside(x, weight, G, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True)) + eps  # √variance + eps, not √(variance + eps)
    x_hat = (x - mu) / sigma
    g = G * weight
    dx = (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True)) / sigma
    return (dx, *_batch_sums(G, x_hat))


def _ln_weight_left_out(x, weight, G, eps=1e-5):
    _, sigma, x_hat = _layer_norm_parts(x, eps)
    dx = (G - G.mean(axis=-1, keepdims=True) - x_hat * (G * x_hat).mean(axis=-1, keepdims=True)) / sigma
    return (dx, *_batch_sums(G, x_hat))


def _layer_norm_cases():
    rng = np.random.default_rng(11)

    def case(shape, dtype=np.float64, spread=1.0, eps=1e-5):
        n = shape[-1]
        x = (rng.standard_normal(shape) * spread + rng.standard_normal()).astype(dtype)
        weight = (1 + 0.5 * rng.standard_normal(n)).astype(dtype)
        return x, weight, rng.standard_normal(shape).astype(dtype), eps

    return [Case("hand-checkable", (np.array([1.0, 2.0, 3.0, 6.0]), np.ones(4), np.array([1.0, 0.0, 0.0, 0.0]), 0.0),
                 detail="one row x = (1, 2, 3, 6), weight 1, G = (1, 0, 0, 0), eps = 0"),
            Case("a batch of rows", case((4, 5)), detail="(4, 5)"),
            Case("batch and tokens", case((2, 3, 8)), detail="(2, 3, 8)",
                 note="the weight and bias are shared by all 2 × 3 rows: their gradients sum over both leading axes"),
            Case("float32", case((3, 6), np.float32)),
            Case("a large eps", case((3, 4), eps=0.5), detail="eps = 0.5",
                 note="eps goes inside the square root: σ = √(variance + eps)"),
            Case("nearly constant rows", case((2, 6), spread=1e-3), detail="variance ≈ 1e-6, eps = 1e-5",
                 note="the variance is smaller than eps here: where eps goes decides the result")]


def _draw_layer_norm(rng, pick):
    """x of the pick's rank, rows of 1 to 9 features (n, the mean's denominator) spread by the pick's values around
    a random mean (tiny: rows far flatter than eps; huge: σ far above 1; zero: exact zeros, some rows constant), a
    random weight, G, and eps from 1e-5 to 0.5."""
    n = int(rng.integers(1, 10))
    shape = leading(rng, pick.rank, last=(n,))
    x = sample(rng, shape, pick.values, pick.dtype)
    if pick.values == "zero" and x.ndim > 1:
        x[(0,) * (x.ndim - 1)] = 0.0  # a constant row: variance 0, σ = √eps
    if pick.values not in ("tiny", "huge"):
        x = x + x.dtype.type(rng.standard_normal())
    eps = float(rng.choice([1e-5, 1e-3, 0.1, 0.5]))
    weight = (1 + 0.5 * rng.standard_normal(n)).astype(pick.dtype)
    return Case(DRAWN, (x, weight, sample(rng, shape, "mixed", pick.dtype), eps),
                detail=f"{pick.said()} in x, shape {shape}, eps = {eps:g}")


register(CodeExercise(
    key="05-layer-norm-backward",
    minutes=25,
    question="Write LayerNorm's backward over the last axis: y = x̂ · weight + bias with x̂ = (x − μ)/σ, μ the mean "
             "and σ = √(variance + eps) of each row (the variance divided by n). Given G = dL/dy, return (dL/dx, "
             "dL/dweight, dL/dbias). x and G may have any leading batch axes; weight has one entry per feature.",
    signature="layer_norm_backward(x, weight, G, eps) -> (dx, dweight, dbias)",
    reference=layer_norm_backward,
    cases=_layer_norm_cases,
    outputs=("dx", "dweight", "dbias"),
    domain=Domain(_draw_layer_norm, ranks=(1, 2, 3, 4), dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("dx", "dweight", "dbias"), size=8),
    slot="layer_norm",
    mistakes=[
        Mistake("μ and σ treated as constants",
                "G · weight / σ is the gradient if the mean and σ did not depend on x. They do: moving one entry of "
                "a row moves its mean and its σ, and so every x̂ of the row. Those two paths give the two "
                "subtracted terms: dx = (g − mean(g) − x̂ · mean(g · x̂)) / σ, with g = G · weight.",
                _ln_constant_mean_and_sigma),
        Mistake("the mean(g · x̂) term forgotten",
                "(g − mean(g)) / σ accounts for the mean's path only. σ depends on x too, and its path gives "
                "− x̂ · mean(g · x̂): dx = (g − mean(g) − x̂ · mean(g · x̂)) / σ.",
                _ln_no_projection),
        Mistake("dweight and dbias not summed over the batch",
                "every row uses the same weight and bias, so their gradients are sums over every row (every axis "
                "but the last): dweight = Σ G · x̂, dbias = Σ G, each of shape (n,), like weight and bias.",
                _ln_unsummed),
        Mistake("eps outside the square root",
                "σ = √(variance + eps), as the forward computes it (and PyTorch's LayerNorm); √variance + eps is "
                "another function, and the difference shows wherever the variance is not much larger than eps.",
                _ln_eps_outside),
        Mistake("the weight left out of dx",
                "y = x̂ · weight + bias, so the gradient reaching x̂ is g = G · weight, not G: use g in dx.",
                _ln_weight_left_out),
    ],
    hints=("Three steps: g = G · weight is the gradient reaching x̂; dbias sums G and dweight sums G · x̂ over every "
           "axis but the last; dx takes g back through x̂ = (x − μ)/σ, where μ and σ depend on x too.",
           "Through x̂ = (x − μ)/σ, g reaches x three ways: directly (over σ), through μ (the row's mean moves with "
           "every x) and through σ (which moves along x̂). Each indirect path subtracts a mean over the last axis "
           "(keepdims=True) from g; all three are divided by σ. For the weight's sums, "
           "axis=tuple(range(G.ndim - 1)) names every axis but the last.",
           "Keep eps inside the square root, σ = np.sqrt(variance + eps), with the variance divided by n "
           "(np.var's default, or the mean of (x − μ)²)."),
))


# --- code exercise: a whole network's backward, tensor by tensor (05+, "Backprop by hand, whole") -------------

NETWORK_SOLUTION = '''\
def network_backward(s):
    """s holds the forward's saved tensors. Return the 12 gradients in the order backward computes them."""
    B = s.idx.shape[0]
    onehot = np.zeros_like(s.probs)
    onehot[np.arange(B), s.y] = 1
    dlogits = (s.probs - onehot) / B                 # the loss is a mean over the batch
    dW2 = s.h.T @ dlogits                            # logits = h W2 + b2
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ s.W2.T
    dhbn = dh * (1 - s.h ** 2)                       # tanh' = 1 − tanh², from its output
    dgamma = (dhbn * s.hhat).sum(axis=0)
    dbeta = dhbn.sum(axis=0)
    g = dhbn * s.gamma                               # the gradient reaching ĥ
    dhpre = (g - g.mean(axis=0) - s.hhat * (g * s.hhat).mean(axis=0)) / s.bn_sigma   # means over the batch
    dW1 = s.flat.T @ dhpre
    demb_hat = (dhpre @ s.W1.T).reshape(s.emb_hat.shape)
    g = demb_hat
    demb = (g - g.mean(axis=-1, keepdims=True)
            - s.emb_hat * (g * s.emb_hat).mean(axis=-1, keepdims=True)) / s.emb_sigma  # means over features
    dC = np.zeros_like(s.C)
    np.add.at(dC, s.idx, demb)                       # a token used twice gets both gradients
    return dlogits, dW2, db2, dh, dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC
'''

NETWORK_SAID = {"dlogits": "dlogits (dL/dlogits, the cross-entropy's)", "dW2": "dW2", "db2": "db2",
                "dh": "dh (dL/dh, after tanh)", "dhbn": "dhbn (dL/dhbn, before tanh: BatchNorm's output)",
                "dgamma": "dgamma", "dbeta": "dbeta", "dhpre": "dhpre (dL/dhpre, BatchNorm's input)",
                "dW1": "dW1", "demb_hat": "demb_hat (dL/demb_hat, LayerNorm's output, shaped (B, k, E))",
                "demb": "demb (dL/demb, LayerNorm's input)", "dC": "dC (the embedding table's gradient)"}


def network_backward(s, *, per_example=True, bn_coupled=True, repeats_added=True, transposed=False,
                     ln_axis=-1, tanh_from_input=False):
    """The reference: the network's 12 gradients, in backward's order, from the forward's saved tensors ``s``
    (the learner sees NETWORK_SOLUTION). Each keyword, changed from its default, makes one mistake of the table."""
    B = s.idx.shape[0]
    onehot = np.zeros_like(s.probs)
    onehot[np.arange(B), s.y] = 1
    dlogits = (s.probs - onehot) / (B if per_example else 1)
    dW2 = dlogits.T @ s.h if transposed else s.h.T @ dlogits
    db2 = dlogits.sum(axis=0)
    dh = dlogits @ s.W2.T
    dhbn = dh * (1 - (s.hbn if tanh_from_input else s.h) ** 2)
    dgamma = (dhbn * s.hhat).sum(axis=0)
    dbeta = dhbn.sum(axis=0)
    g = dhbn * s.gamma
    if bn_coupled:
        dhpre = (g - g.mean(axis=0) - s.hhat * (g * s.hhat).mean(axis=0)) / s.bn_sigma
    else:
        dhpre = g / s.bn_sigma
    dW1 = dhpre.T @ s.flat if transposed else s.flat.T @ dhpre
    demb_hat = (dhpre @ s.W1.T).reshape(s.emb_hat.shape)
    g = demb_hat
    demb = (g - g.mean(axis=ln_axis, keepdims=True)
            - s.emb_hat * (g * s.emb_hat).mean(axis=ln_axis, keepdims=True)) / s.emb_sigma
    dC = np.zeros_like(s.C)
    if repeats_added:
        np.add.at(dC, s.idx, demb)
    else:
        dC[s.idx] += demb
    return dlogits, dW2, db2, dh, dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC


def _network_variant(**mistake):
    return lambda s: network_backward(s, **mistake)


def _saved(idx, y, C, W1, gamma, beta, W2, b2):
    """The forward's saved tensors, each array read-only (as the engine hands its own to your code)."""
    from ..nb05 import network_forward

    s = network_forward(idx, y, C, W1, gamma, beta, W2, b2)
    for name, value in vars(s).items():
        setattr(s, name, read_only(value, copy=True) if isinstance(value, np.ndarray) else value)
    return s


def _run_network(fn, *args):
    return fn(_saved(*args))


def _network_term_sizes(case):
    """For each of the 12 gradients, entry by entry, the sum of the absolute values of the terms that add up to it
    (every product of the backward's sums taken in absolute value, in float64). Where the terms nearly cancel (two
    examples of one token: BatchNorm's gradients sum to 0 over the batch, so dW1 is about 1e-14 from terms of 100),
    float32's rounding of those terms is all an answer can show: the check allows a few float32 epsilons of them."""
    s = network_forward(*(a.astype(np.float64) if a.dtype.kind == "f" else a for a in case.args))
    B = s.idx.shape[0]
    onehot = np.zeros_like(s.probs)
    onehot[np.arange(B), s.y] = 1
    dlogits = (s.probs + onehot) / B
    h, W2, hhat, flat, W1, emb_hat = (np.abs(t) for t in (s.h, s.W2, s.hhat, s.flat, s.W1, s.emb_hat))
    dW2, db2, dh = h.T @ dlogits, dlogits.sum(axis=0), dlogits @ W2.T
    dhbn = dh * (1 + s.h ** 2)
    dgamma, dbeta = (dhbn * hhat).sum(axis=0), dhbn.sum(axis=0)
    g = dhbn * np.abs(s.gamma)
    dhpre = (g + g.mean(axis=0) + hhat * (g * hhat).mean(axis=0)) / s.bn_sigma
    dW1, demb_hat = flat.T @ dhpre, (dhpre @ W1.T).reshape(s.emb_hat.shape)
    demb = (demb_hat + demb_hat.mean(axis=-1, keepdims=True)
            + emb_hat * (demb_hat * emb_hat).mean(axis=-1, keepdims=True)) / s.emb_sigma
    dC = np.zeros_like(s.C)
    np.add.at(dC, s.idx, demb)
    return dlogits, dW2, db2, dh, dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC


def _network_expected(case):
    """The engine's gradients: the same network on haaw Tensors, one backward."""
    from ..nb05 import ORDER, engine_gradients

    grads = engine_gradients(*case.args)
    return tuple(grads[name] for name in ORDER)


def _network_case(rng, batch, context, vocab, emb, hidden, dtype=np.float64, repeat=True, scale=None):
    idx = rng.integers(0, vocab, (batch, context))
    if repeat and idx.size > 1:
        idx.flat[-1] = idx.flat[0]  # one token used twice at least
    p = {"C": rng.standard_normal((vocab, emb)),
         "W1": rng.standard_normal((context * emb, hidden)) / np.sqrt(context * emb),
         "gamma": 1 + 0.5 * rng.standard_normal(hidden), "beta": 0.5 * rng.standard_normal(hidden),
         "W2": rng.standard_normal((hidden, vocab)) / np.sqrt(hidden), "b2": 0.5 * rng.standard_normal(vocab)}
    for name, factor in (scale or {}).items():
        p[name] = p[name] * factor
    y = rng.integers(0, vocab, batch)
    return (idx, y, *(p[n].astype(dtype) for n in ("C", "W1", "gamma", "beta", "W2", "b2")))


def _network_cases():
    rng = np.random.default_rng(12)
    tiny = (np.array([[0, 1], [1, 0], [0, 2]]), np.array([1, 0, 2]), *_network_case(rng, 3, 2, 3, 3, 3)[2:])
    return [Case("small", tiny, detail="B = 3 examples of k = 2 tokens, vocabulary 3, E = 3, H = 3",
                 note="token 0 is used three times: dC's row 0 adds all three of its gradients", note_on=("dC",)),
            Case("the notebook's shapes", _network_case(rng, 8, 3, 10, 4, 16), detail="B = 8, k = 3, V = 10, E = 4, H = 16"),
            Case("one token everywhere", (np.zeros((4, 2), dtype=int), rng.integers(0, 5, 4),
                                          *_network_case(rng, 4, 2, 5, 3, 6)[2:]),
                 detail="every position holds token 0",
                 note="all 8 positions look up row 0 of C: dC's row 0 is the sum of all 8 gradients, the rest 0",
                 note_on=("dC",)),
            Case("float32", _network_case(rng, 6, 2, 7, 3, 5, np.float32)),
            Case("a saturated tanh", _network_case(rng, 5, 2, 6, 3, 4, scale={"gamma": 6.0}), detail="gamma × 6",
                 note="tanh's slope is 1 − h², from its output h; where |h| is near 1 the slope is near 0"),
            Case("a batch of 2", _network_case(rng, 2, 3, 4, 2, 3), detail="B = 2",
                 note="with two examples BatchNorm's ĥ is ±1 in every feature: the batch terms matter most")]


def _draw_network(rng, pick):
    """A network of the pick's dtype, with B from 2 to 9 examples, k from 1 to 3 tokens of E from 1 to 4 features
    (E = 1: LayerNorm makes every token 0), H from 1 to 6 hidden features and a vocabulary of 2 to 8 (so tokens
    repeat); the pick's values in C, W1 or W2 (huge W2: saturated softmax; tiny C: rows flatter than eps)."""
    B, k, V, E, H = (int(rng.integers(lo, hi + 1)) for lo, hi in ((2, 9), (1, 3), (2, 8), (1, 4), (1, 6)))
    args = list(_network_case(rng, B, k, V, E, H, pick.dtype))
    where = str(rng.choice(["C", "W1", "W2"]))
    position = {"C": 2, "W1": 3, "W2": 6}[where]
    if pick.values != "mixed":
        args[position] = sample(rng, args[position].shape, pick.values, pick.dtype)
    return Case(DRAWN, tuple(args), detail=f"{pick.said()} in {where}, B = {B}, k = {k}, V = {V}, E = {E}, H = {H}")


register(CodeExercise(
    key="05-network-backward",
    minutes=30,
    question="Write the backward of the whole network, tensor by tensor: given the forward's saved tensors s "
             "(embedding lookup, LayerNorm over each token's features, linear, BatchNorm over the batch, tanh, "
             "linear, cross-entropy averaged over the batch), return the 12 gradients (dlogits, dW2, db2, dh, dhbn, "
             "dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC), in the order backward computes them.",
    signature="network_backward(s) -> (dlogits, dW2, db2, dh, dhbn, dgamma, dbeta, dhpre, dW1, demb_hat, demb, dC)",
    reference=network_backward,
    # the other exercises' answers it could be put together from, as well as the engine's backward
    refuses=(*guard.BACKWARD, "nn.cross_entropy", "ops.unbroadcast",
             *(f"reference {key}" for key in ("03-cross-entropy", "03-linear-backward", "03-unbroadcast",
                                               "04-tanh-backward", "05-softmax-backward", "05-layer-norm-backward"))),
    solution_code=NETWORK_SOLUTION,
    cases=_network_cases,
    outputs=("dlogits", "dW2", "db2", "dh", "dhbn", "dgamma", "dbeta", "dhpre", "dW1", "demb_hat", "demb", "dC"),
    in_order=True,
    said=NETWORK_SAID,
    run=_run_network,
    expected=_network_expected,
    term_sizes=_network_term_sizes,
    domain=Domain(_draw_network, dtypes=(np.float64, np.float32), values=VALUES,
                  keeps_dtype=("dlogits", "dW2", "db2", "dh", "dhbn", "dgamma", "dbeta", "dhpre", "dW1", "demb_hat",
                               "demb", "dC"), size=10),
    mistakes=[
        Mistake("no 1/B in the cross-entropy's gradient",
                "the loss is the mean of B examples' losses, so each example's softmax − one-hot is divided by B. "
                "Without it every gradient after dlogits is B times too large.",
                _network_variant(per_example=False)),
        Mistake("tanh's slope taken at its input",
                "h = tanh(hbn), and tanh' = 1 − tanh², which is 1 − h², the forward's *output* squared; 1 − hbn² "
                "is another number.",
                _network_variant(tanh_from_input=True)),
        Mistake("BatchNorm's gradient without the batch terms",
                "g · gamma / σ would be the gradient if the batch's mean and σ were constants. They are computed "
                "from every example, so moving one example moves them, and so every other example's ĥ: subtract "
                "the batch means of g and of g · ĥ (times ĥ), as in LayerNorm's backward, but over axis 0.",
                _network_variant(bn_coupled=False)),
        Mistake("the weight gradients transposed",
                "a weight's gradient has the weight's shape: for logits = h W2, dW2 = hᵀ dlogits, (H, V) like W2, "
                "not dlogitsᵀ h; the same for dW1 = flatᵀ dhpre.",
                _network_variant(transposed=True)),
        Mistake("LayerNorm's backward over the batch axis",
                "LayerNorm normalises each token over its own E features (axis −1), so its backward takes its two "
                "means over axis −1 too; axis 0 is BatchNorm's axis, the batch.",
                _network_variant(ln_axis=0)),
        Mistake("dC[idx] += demb, which drops repeated tokens",
                "with an index array, NumPy's += reads dC[idx], adds, and writes back once per position: a token "
                "used twice is written twice, and the second write replaces the first, so only one of its "
                "gradients is kept. np.add.at(dC, s.idx, demb) adds every one (a scatter-add).",
                _network_variant(repeats_added=False)),
    ],
    hints=("Go from the loss back, one line of the forward at a time, and check as you go: the lines you have not "
           "written yet may stay `...`, and check says whether the ones before are right. Each gradient has the "
           "shape of its tensor; a weight's gradient sums over the batch.",
           "The cross-entropy of a mean gives (probs − one-hot) / B. A linear layer gives Xᵀ G for its weight and "
           "G Wᵀ for its input (notebook 03). tanh's slope comes from its output. BatchNorm's backward is "
           "LayerNorm's (05+, above) with the means taken over the batch, axis 0, and gamma in g = dhbn · gamma; "
           "the embeddings' LayerNorm is LayerNorm's own, over axis −1, with no weight.",
           "The lookup emb = C[idx] copies rows of C, so each row of C collects the gradients of every position "
           "that copied it. In NumPy, dC[idx] += demb does not add twice for a repeated index; np.add.at does."),
))
