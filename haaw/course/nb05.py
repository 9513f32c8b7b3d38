"""Why attention divides its scores by √d_k, and what saturation does to softmax gradients.

With query and key entries of variance 1, a dot product over d_k dimensions has variance d_k:
the scores spread out as d_k grows, the softmax saturates (one weight near 1, the rest near 0)
and its gradient collapses. Dividing by √d_k brings the variance back to 1, whatever d_k is.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..engine.ops import OPS, Context

SOFTMAX = OPS["softmax"]


def score_variance(d_k: int, scaled: bool, samples: int = 4000, seed: int = 0) -> float:
    """Variance of q·k (times 1/√d_k if ``scaled``) for random unit-variance q and k."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, samples, d_k))
    scores = np.sum(q * k, axis=1) / (np.sqrt(d_k) if scaled else 1.0)
    return float(scores.var())


def softmax_gradient_norm(logits: np.ndarray, samples: int = 200, seed: int = 0) -> float:
    """Average ‖dL/d(logits)‖ through a softmax, over random unit upstream gradients."""
    rng = np.random.default_rng(seed)
    ctx = Context()
    SOFTMAX.forward(ctx, logits)  # keeps the output s on ctx, as the engine's forward does
    (vjp,) = SOFTMAX.vjps
    norms = [np.linalg.norm(vjp(ctx, g / np.linalg.norm(g))) for g in rng.standard_normal((samples, logits.size))]
    return float(np.mean(norms))


def attention_row(d_k: int, scaled: bool = True, temperature: float = 1.0, keys: int = 16, seed: int = 0) -> dict:
    """One query against ``keys`` random keys: weights, entropy, and the softmax's gradient norm."""
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal(d_k), rng.standard_normal((keys, d_k))
    scores = (k @ q) / (np.sqrt(d_k) if scaled else 1.0) / temperature
    weights = SOFTMAX.forward(Context(), scores)
    entropy = float(-np.sum(weights * np.log(np.maximum(weights, 1e-300))))
    return {"scores": scores, "weights": weights, "entropy": entropy, "max weight": float(weights.max()),
            "gradient norm": softmax_gradient_norm(scores)}


def describe_attention_row(d_k: int, scaled: bool = True, temperature: float = 1.0) -> str:
    row = attention_row(d_k, scaled, temperature)
    return (f"d_k = {d_k}, {'scaled by 1/√d_k' if scaled else 'not scaled'}, temperature {temperature:g}: "
            f"score std {row['scores'].std():.2f}, largest weight {row['max weight']:.3f}, "
            f"entropy {row['entropy']:.2f} (uniform: {np.log(16):.2f}), "
            f"softmax gradient norm {row['gradient norm']:.2e}")


# --- backprop by hand, whole (05+): a small network, its forward in NumPy, and the engine's gradients --------------
EPS = 1e-5  # both norms' eps, as PyTorch's default
ORDER = ("dlogits", "dW2", "db2", "dh", "dhbn", "dgamma", "dbeta", "dhpre", "dW1", "demb_hat", "demb", "dC")


def init_network(batch: int = 8, context: int = 3, vocab: int = 10, emb: int = 4, hidden: int = 16, seed: int = 0,
                 dtype=np.float64) -> dict:
    """Tokens, targets and parameters of the companion's network, drawn from ``seed``. The parameters are not
    initialised as for training but oddly on purpose (a gamma far from 1, a beta far from 0, a bias in the output
    layer), so that no gradient can be right by accident of a zero or a one."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, vocab, (batch, context))
    if batch > 1:
        idx[1, 0] = idx[0, 0]  # a token used twice at least: the embedding's gradient must add both
    params = {"C": rng.standard_normal((vocab, emb)),
              "W1": rng.standard_normal((context * emb, hidden)) / np.sqrt(context * emb),
              "gamma": 1 + 0.5 * rng.standard_normal(hidden), "beta": 0.5 * rng.standard_normal(hidden),
              "W2": rng.standard_normal((hidden, vocab)) / np.sqrt(hidden), "b2": 0.5 * rng.standard_normal(vocab)}
    return {"idx": idx, "y": rng.integers(0, vocab, batch), **{k: v.astype(dtype) for k, v in params.items()}}


def network_forward(idx, y, C, W1, gamma, beta, W2, b2):
    """The forward pass, in NumPy, keeping what backward needs; the notebook shows the same lines."""
    B = idx.shape[0]
    emb = C[idx]                                             # (B, k, E)  embedding lookup
    emb_mu = emb.mean(axis=-1, keepdims=True)                # LayerNorm over each token's E features
    emb_sigma = np.sqrt(emb.var(axis=-1, keepdims=True) + EPS)
    emb_hat = (emb - emb_mu) / emb_sigma                     # (B, k, E)
    flat = emb_hat.reshape(B, -1)                            # (B, k·E)   the k tokens side by side
    hpre = flat @ W1                                         # (B, H)     linear, no bias: BatchNorm's beta is it
    bn_mu = hpre.mean(axis=0, keepdims=True)                 # BatchNorm: statistics over the batch
    bn_sigma = np.sqrt(hpre.var(axis=0, keepdims=True) + EPS)
    hhat = (hpre - bn_mu) / bn_sigma                         # (B, H)
    hbn = gamma * hhat + beta
    h = np.tanh(hbn)                                         # (B, H)
    logits = h @ W2 + b2                                     # (B, V)
    shifted = logits - logits.max(axis=1, keepdims=True)     # softmax, stable: the largest logit becomes 0
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    probs = np.exp(log_probs)                                # (B, V)
    loss = -log_probs[np.arange(B), y].mean()                # cross-entropy, the mean over the batch
    return SimpleNamespace(idx=idx, y=y, C=C, W1=W1, gamma=gamma, beta=beta, W2=W2, b2=b2, emb=emb,
                           emb_sigma=emb_sigma, emb_hat=emb_hat, flat=flat, hpre=hpre, bn_sigma=bn_sigma,
                           hhat=hhat, hbn=hbn, h=h, logits=logits, probs=probs, loss=loss)


def batch_norm(x, gamma, beta, eps: float = EPS):
    """BatchNorm in training mode on haaw Tensors, from the table's operations: each feature normalised with the
    mean and (biased) variance of the batch, axis 0, then scaled and shifted."""
    centred = x - x.mean(0, keepdim=True)
    return centred / ((centred * centred).mean(0, keepdim=True) + eps) ** 0.5 * gamma + beta


def engine_gradients(idx, y, C, W1, gamma, beta, W2, b2) -> dict:
    """The same network on haaw Tensors: after one backward, every tensor of ORDER's gradient, by name (an
    intermediate tensor keeps in ``.grad`` what backward sent it)."""
    from ..engine.tensor import Tensor
    from ..nn import functional as F

    leaf = {name: Tensor(a, requires_grad=True) for name, a in (("C", C), ("W1", W1), ("gamma", gamma),
                                                                 ("beta", beta), ("W2", W2), ("b2", b2))}
    emb = leaf["C"][idx]
    emb_hat = F.layer_norm(emb, (emb.shape[-1],), eps=EPS)
    hpre = emb_hat.reshape(idx.shape[0], -1) @ leaf["W1"]
    hbn = batch_norm(hpre, leaf["gamma"], leaf["beta"])
    h = hbn.tanh()
    logits = h @ leaf["W2"] + leaf["b2"]
    F.cross_entropy(logits, y).backward()
    tensors = {"logits": logits, "h": h, "hbn": hbn, "hpre": hpre, "emb_hat": emb_hat, "emb": emb, **leaf}
    return {name: tensors[name[1:]].grad for name in ORDER}


def input_gradient(emb, y, W1, gamma, beta, W2, b2, norm: str = "batch") -> np.ndarray:
    """dL/d(emb), every example's, with the hidden layer normalised by BatchNorm (``norm="batch"``) or by a
    LayerNorm with the same gamma and beta (``"layer"``); the embeddings are the input here."""
    from ..engine.tensor import Tensor
    from ..nn import functional as F

    x = Tensor(emb, requires_grad=True)
    hpre = F.layer_norm(x, (emb.shape[-1],), eps=EPS).reshape(emb.shape[0], -1) @ Tensor(W1)
    if norm == "batch":
        hbn = batch_norm(hpre, Tensor(gamma), Tensor(beta))
    else:
        hbn = F.layer_norm(hpre, (hpre.shape[-1],), Tensor(gamma), Tensor(beta), eps=EPS)
    F.cross_entropy(hbn.tanh() @ Tensor(W2) + Tensor(b2), y).backward()
    return x.grad


def coupling(net: dict, shifts, norm: str = "batch", seed: int = 1) -> np.ndarray:
    """Move example 0's input (its embeddings) by each of ``shifts`` times a random direction of unit size per
    entry; for each, the relative change of every *other* example's input gradient, ‖Δ dx_j‖ / ‖dx_j‖, a row per
    shift, a column per example j = 1 … B − 1."""
    emb = net["C"][net["idx"]]
    args = (net["y"], net["W1"], net["gamma"], net["beta"], net["W2"], net["b2"])
    before = input_gradient(emb, *args, norm=norm)
    direction = np.random.default_rng(seed).standard_normal(emb.shape[1:])
    rows = []
    for t in shifts:
        moved = emb.copy()
        moved[0] = moved[0] + t * direction
        after = input_gradient(moved, *args, norm=norm)
        rows.append([np.linalg.norm(after[j] - before[j]) / np.linalg.norm(before[j]) for j in range(1, len(emb))])
    return np.array(rows)
