"""Functions on tensors that are not methods: what a model's layers and losses are made of.

Import it as PyTorch's is imported: ``import haaw.nn.functional as F``.
"""
from __future__ import annotations

import numpy as np

from ..engine import Function, Tensor, checks, plugins
from ..engine.guard import refusable
from ..engine.ops import OPS, Context, unbroadcast
from ..engine.tensor import apply
from . import generator


def _tensors(what: str, **arguments) -> None:
    """Refuse an argument that is not a Tensor (a NumPy array, a list) where a function needs one, as PyTorch
    refuses it, saying what to write instead; None passes (an optional weight left out)."""
    for name, x in arguments.items():
        if x is not None and not isinstance(x, Tensor):
            given = "a NumPy array" if isinstance(x, np.ndarray) else f"a {type(x).__name__}"
            raise TypeError(f"{what}(): argument '{name}' must be a Tensor, not {given} (PyTorch refuses it too). "
                            f"Write haaw.tensor({name}) for a copy, or haaw.from_numpy({name}) to share the array")


def relu(x: Tensor) -> Tensor:
    return x.relu()


def tanh(x: Tensor) -> Tensor:
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    return x.sigmoid()


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight + bias, as one operation, with ``weight`` of shape (in_features, out_features).

    (PyTorch's ``F.linear`` takes the transpose, (out, in), and computes input @ weight.T + bias.) A 1-D input,
    one example, gives a 1-D output, as in PyTorch.
    """
    _tensors("linear", input=input, weight=weight, bias=bias)
    if input.ndim == 1 and weight.ndim == 2:
        return linear(input.reshape(1, input.shape[0]), weight, bias).reshape(weight.shape[1])
    if bias is None:
        return input @ weight
    if input.ndim < 2 or weight.ndim != 2 or input.shape[-1] != weight.shape[0] or bias.shape != weight.shape[1:]:
        raise ValueError(f"linear: input {input.shape} @ weight {weight.shape} + bias {bias.shape}: the input's "
                         f"last axis must match the weight's first, and the bias the weight's second")
    return apply("linear", input, weight, bias)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, computed after subtracting the max (no overflow)."""
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log(softmax(x)), computed directly so that tiny probabilities do not become log(0)."""
    return x.log_softmax(dim)


@refusable("nn.cross_entropy", "the engine's cross-entropy (F.cross_entropy)")
def cross_entropy(input: Tensor, target, weight=None, ignore_index: int = -100, reduction: str = "mean",
                  *, mask=None) -> Tensor:
    """The negative log-probability of each target class, averaged or summed, with PyTorch's shapes.

    ``input`` holds logits of shape (N, C), or (N, C, d1, ...) with the classes on axis 1, or (C,);
    ``target`` holds integer class ids of shape (N,), (N, d1, ...) or (). Entries whose target is
    ``ignore_index`` count for nothing, and "mean" divides by the number of entries that count
    (weighted by ``weight[class]`` if class weights are given). ``mask`` (haaw's extra, same shape
    as ``target``, 1 = counts, 0 = padding) does the same for padded positions: both remove entries
    *before* the reduction. ``reduction``: "mean", "sum" or "none" (one loss per entry).
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"cross_entropy: input must be a Tensor of logits, got {type(input).__name__}")
    target = np.asarray(target.data if isinstance(target, Tensor) else target)
    if target.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: target must hold integer class ids, got dtype {target.dtype}")
    if input.ndim == 0 or (input.ndim == 1 and target.ndim != 0) or \
            (input.ndim > 1 and target.shape != input.shape[:1] + input.shape[2:]):
        expected = "()" if input.ndim == 1 else str(input.shape[:1] + input.shape[2:])
        raise ValueError(f"cross_entropy: target of shape {target.shape} does not fit input of shape "
                         f"{input.shape}: the classes are on axis 1 (as in PyTorch), so target should have shape "
                         f"{expected}. For logits of shape (B, T, C), pass input.reshape(-1, C) and "
                         "target.reshape(-1).")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    if input.ndim > 2:  # (N, C, d1, ...) -> (N, d1, ..., C): one row of logits per entry
        input = input.permute(0, *range(2, input.ndim), 1)
    rows = input if input.ndim == 2 else input.reshape(-1, classes)
    flat = target.reshape(-1)
    ignored = flat == ignore_index
    kept = flat[~ignored] if ignored.any() else flat
    if kept.size and (kept.min() < 0 or kept.max() >= classes):
        bad = kept[(kept < 0) | (kept >= classes)][0]
        raise ValueError(f"cross_entropy: target {bad} is not a class id: they must lie in [0, {classes - 1}] "
                         f"(or equal ignore_index={ignore_index})")
    safe = np.where(ignored, 0, flat) if kept is not flat else flat
    losses = apply("cross_entropy_rows", rows, targets=safe)
    if reduction == "mean" and weight is None and mask is None and kept is flat:
        return losses.mean()  # the common case: one more operation
    share = (~ignored).astype(np.float64)
    if weight is not None:
        if isinstance(weight, Tensor) and weight.requires_grad:
            raise RuntimeError("cross_entropy: the class weights require grad, but no gradient flows back to them "
                               "(PyTorch refuses them too). Pass weight.detach()")
        weight = np.asarray(weight.data if isinstance(weight, Tensor) else weight, dtype=np.float64)
        if weight.shape != (classes,):
            raise ValueError(f"cross_entropy: weight must have one entry per class, shape ({classes},), "
                             f"got {weight.shape}")
        share = share * weight[safe]
    if mask is not None:
        if isinstance(mask, Tensor) and mask.requires_grad:
            raise RuntimeError("cross_entropy: the mask requires grad, but no gradient flows back to it (it only says "
                               "which entries count). Pass mask.detach()")
        mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
        if mask.shape != target.shape:
            raise ValueError(f"cross_entropy: mask of shape {mask.shape} must match target {target.shape}")
        share = share * mask.reshape(-1)
    if np.any(share != 1):
        losses = losses * share.astype(rows.dtype)
    if reduction == "none":
        return losses.reshape(target.shape)
    if reduction == "sum":
        return losses.sum()
    total = float(np.sum(share))
    if total == 0:
        raise ValueError("cross_entropy: every entry is ignored or masked, so there is nothing to average "
                         "(PyTorch returns nan here)")
    return losses.sum() / total


def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """While training, zero each entry with probability ``p`` and scale the others by 1/(1 − p), so the expected
    value is unchanged (``torch.nn.functional.dropout``); outside training, the input itself. The mask comes
    from haaw's generator (``haaw.manual_seed``), which a checkpoint's recomputation replays: the same mask."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p = {p!r} is a probability, from 0 to 1")
    if not training or p == 0.0:
        return input
    keep = generator.rng().random(input.shape) >= p
    scale = np.zeros(input.shape) if p == 1.0 else keep / (1.0 - p)
    return input * Tensor(scale.astype(input.dtype, copy=False))


def _narrow(x: Tensor) -> bool:
    """A 16- or 8-bit floating-point format (float16, bfloat16, the float8s): one PyTorch computes in float32."""
    kind = x.data.dtype.kind
    return kind == "V" or (kind == "f" and x.data.dtype.itemsize < 4)


def gelu(x: Tensor, approximate: str = "tanh") -> Tensor:
    """GELU, tanh form: x · Φ(x) approximated as ½x(1 + tanh(√(2/π)(x + 0.044715x³))).

    Smooth where ReLU has a corner, and slightly negative for small negative x, so a unit is never
    completely dead. haaw has only the tanh form (PyTorch's default is the exact one, with erf).
    """
    if approximate != "tanh":
        raise ValueError(f"gelu: haaw implements approximate='tanh' only, got {approximate!r}")
    if _narrow(x):
        # in 16 bits, x³ overflows from |x| ≈ 40 (fp16) and its gradient becomes 0 · inf = nan: compute in
        # float32 and round the result, as PyTorch does
        return gelu(x.to(np.float32)).to(x.data.dtype)
    inner = (x + x**3 * 0.044715) * float(np.sqrt(2 / np.pi))
    return x * (inner.tanh() + 1.0) * 0.5


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise over the last axes (``normalized_shape``) to mean 0 and variance 1, then scale and shift.

    y = (x − mean) / √(variance + ε) · weight + bias, the variance being the biased one (divided by
    n, not n − 1). Built from the table's operations, so its backward needs no formula of its own:
    the chain rule through mean, subtraction, power and division is the layer-norm gradient.
    """
    _tensors("layer_norm", input=x)
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
    if not shape or x.shape[-len(shape):] != shape:
        raise ValueError(f"layer_norm: normalized_shape {shape} must be the last axes of the input, "
                         f"whose shape is {x.shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(np.shape(p.data if isinstance(p, Tensor) else p)) != shape:
            raise ValueError(f"layer_norm: the {name} has shape {tuple(np.shape(getattr(p, 'data', p)))}, but "
                             f"normalized_shape is {shape}: one {name} per normalised entry")
    if _narrow(x):
        # in 16 bits the mean and variance of a few features lose most of their digits: compute in float32 and
        # round the result, as PyTorch does
        wide = [None if p is None else (p.to(np.float32) if isinstance(p, Tensor) else p) for p in (weight, bias)]
        return layer_norm(x.to(np.float32), shape, *wide, eps=eps).to(x.data.dtype)
    yours = plugins.override("layer_norm")  # your layer_norm_backward (haaw.use)
    if yours:
        return _LayerNormWithYourBackward.apply(x, weight, bias, shape, eps, yours)
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    centred = x - x.mean(dims, keepdim=True)
    variance = (centred * centred).mean(dims, keepdim=True)
    out = centred / (variance + eps) ** 0.5
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


class _LayerNormWithYourBackward(Function):
    """LayerNorm as one operation whose backward is your ``layer_norm_backward`` (the "layer_norm" slot). Your
    function works on the last axis: several normalised axes are flattened into one for it, and a missing weight
    is a weight of ones (its gradient is then not used)."""

    @staticmethod
    def forward(ctx, x, weight, bias, shape, eps, yours):
        n = int(np.prod(shape))
        flat = x.reshape(x.shape[:x.ndim - len(shape)] + (n,))
        w = np.ones(n, dtype=x.dtype) if weight is None else np.asarray(weight).reshape(n)
        centred = flat - flat.mean(axis=-1, keepdims=True)
        x_hat = centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
        out = x_hat * w
        if bias is not None:
            out = out + np.asarray(bias).reshape(n)
        ctx.flat, ctx.w, ctx.eps, ctx.yours = flat, w, eps, yours  # the function in use when the graph was built
        ctx.x_shape, ctx.shape = x.shape, shape
        return out.reshape(x.shape)

    @staticmethod
    def backward(ctx, g):
        grads = ctx.yours(ctx.flat, ctx.w, g.reshape(ctx.flat.shape), ctx.eps)
        if not (isinstance(grads, (tuple, list)) and len(grads) == 3):
            return grads  # Function names the wrong count
        dx, dw, db = (_reshaped(d, s) for d, s in zip(grads, (ctx.x_shape, ctx.shape, ctx.shape)))
        weight_wants, bias_wants = ctx.needs_input_grad[1:3]
        return dx, dw if weight_wants else None, db if bias_wants else None, None, None, None


def _reshaped(g, shape):
    """``g`` in ``shape`` if it holds that many numbers; otherwise as it is, for the engine to refuse by name."""
    g = np.asarray(g)
    return g.reshape(shape) if g.size == int(np.prod(shape)) else g


plugins.slot("layer_norm", "layer_norm_backward(x, weight, G, eps) -> (dx, dweight, dbias) for "
                           "y = (x − mean) / √(variance + eps) · weight + bias over the last axis")


def causal_mask(length: int) -> np.ndarray:
    """True where position i may look at position j, that is j ≤ i (no peeking ahead)."""
    return np.tril(np.ones((length, length), dtype=bool))


def _attention_mask(attn_mask):
    """(boolean mask or None, tensor to add to the scores or None): PyTorch's two kinds of attention mask."""
    if attn_mask is None:
        return None, None
    data = attn_mask.data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
    if data.dtype == np.bool_:
        return data, None
    if data.dtype.kind == "f":
        return None, attn_mask if isinstance(attn_mask, Tensor) else Tensor(data)
    raise TypeError(f"attention: attn_mask must be boolean (True: may attend) or floating-point (added to the "
                    f"scores, 0 or -inf), as in PyTorch; got {data.dtype}")


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None, *,
                                 return_weights: bool = False):
    """softmax(query keyᵀ · scale) value, over the last two axes.

    ``attn_mask`` (broadcastable to the scores' shape (..., queries, keys)), as in PyTorch: boolean,
    True meaning "may attend"; or floating-point, added to the scores (0 keeps a key, -inf removes it). ``is_causal=True`` adds the causal mask. ``scale`` defaults to
    1/√d_k, which keeps the scores' variance near 1. A query whose row of the mask is all False
    gets output 0 and gradient 0, never NaN. ``return_weights`` (haaw's extra) also returns the
    attention weights. The arguments are PyTorch's, in PyTorch's order; ``dropout_p`` must be 0: haaw has no
    dropout (PyTorch drops attention weights at that rate while training).
    """
    if dropout_p != 0:
        raise NotImplementedError(f"attention: dropout_p={dropout_p!r}, but haaw has no dropout; PyTorch would drop "
                                  "each attention weight with that probability while training. Pass dropout_p=0.0 "
                                  "(the fifth argument is dropout_p, as in PyTorch; is_causal comes after it)")
    _tensors("scaled_dot_product_attention", query=query, key=key, value=value)
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(f"attention: query, key and value need at least 2 axes each, (..., positions, features), "
                           f"as in PyTorch; got query {query.shape}, key {key.shape}, value {value.shape}. One vector "
                           "of d features is one position: write it as t.reshape(1, d)")
    d_k = query.shape[-1]
    mask, added = _attention_mask(attn_mask)
    if key.shape[-1] != d_k:
        raise ValueError(f"attention: queries have {d_k} features but keys have {key.shape[-1]}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"attention: {key.shape[-2]} keys but {value.shape[-2]} values")
    yours = None if return_weights else plugins.override("attention")  # your attention_backward (haaw.use)
    if yours and scale is not None and not np.isclose(scale, d_k ** -0.5, rtol=1e-12, atol=0.0):
        raise ValueError(f"attention: your attention_backward assumes the scale 1/√d_k; this call asks for {scale:g}")
    if yours and added is not None:
        raise TypeError("attention: your attention_backward takes a boolean mask (True: may attend); this call "
                        "passes a floating-point mask, which is added to the scores")
    scale = 1.0 / float(np.sqrt(d_k)) if scale is None else scale
    problem = checks.shape_error("matmul", (query.data, np.swapaxes(key.data, -1, -2)))
    if problem:  # the product query @ keyᵀ cannot be formed: say so before any mask is fitted to it
        raise ValueError(f"attention: {problem}")
    scores_shape = (*np.broadcast_shapes(query.shape[:-2], key.shape[:-2]), query.shape[-2], key.shape[-2])
    if is_causal:
        causal = np.tril(np.ones(scores_shape[-2:], dtype=bool))  # query i sees keys 0..i, as in PyTorch
        mask = causal if mask is None else mask & causal
    if mask is not None:
        try:
            mask = np.broadcast_to(mask, scores_shape)
        except ValueError:
            raise ValueError(f"attention: a mask of shape {mask.shape} does not fit scores of shape "
                             f"{scores_shape} (queries × keys)") from None
    if yours:
        return _AttentionWithYourBackward.apply(query, key, value, mask, yours)
    scores = (query @ key.transpose(-2, -1)) * scale
    if added is not None:  # a floating-point mask is added to the scores (0 keeps, -inf removes), as in PyTorch
        try:
            scores = scores + added
        except ValueError:
            raise ValueError(f"attention: a mask of shape {added.shape} does not fit scores of shape "
                             f"{scores.shape} (queries × keys)") from None
    if mask is None:
        weights = scores.softmax(-1)
    else:
        weights = apply("masked_softmax", scores, mask=mask, dim=-1)
    out = weights @ value
    return (out, weights) if return_weights else out


class _AttentionWithYourBackward(Function):
    """Attention as one operation whose backward is your ``attention_backward`` (the "attention" slot): the
    forward is the engine's, on the mask the normal path built and checked."""

    @staticmethod
    def forward(ctx, q, k, v, mask, yours):
        scores = (q @ np.swapaxes(k, -1, -2)) / float(np.sqrt(q.shape[-1]))  # a Python float keeps float32
        softmax = OPS["softmax" if mask is None else "masked_softmax"]
        weights = softmax.forward(Context(), scores) if mask is None else softmax.forward(Context(), scores, mask)
        ctx.q, ctx.k, ctx.v, ctx.mask = q, k, v, mask
        ctx.yours = yours  # the function in use when the graph was built
        return weights @ v

    @staticmethod
    def backward(ctx, g):
        grads = ctx.yours(ctx.q, ctx.k, ctx.v, ctx.mask, g)
        if isinstance(grads, (tuple, list)) and len(grads) == 3:  # otherwise Function names the wrong count
            # an input broadcast across the batch (one key for every sequence) gets its gradient summed back
            grads = [_summed_to(d, a.shape) for d, a in zip(grads, (ctx.q, ctx.k, ctx.v))]
        return (*grads, None, None)


def _summed_to(g, shape):
    """``g`` summed down to ``shape`` where broadcasting stretched ``shape`` to it; any other shape as it is, for the
    engine to refuse with the operation's name."""
    g = np.asarray(g)
    try:
        stretched = np.broadcast_shapes(g.shape, shape) == g.shape and g.shape != shape
    except ValueError:
        stretched = False
    return unbroadcast(g, shape) if stretched else g


plugins.slot("attention", "attention_backward(Q, K, V, mask, G) -> (dQ, dK, dV) for softmax(QKᵀ/√d_k, masked) V")
