"""The same transformer block in PyTorch, with haaw's weights, for cross-checks.

Written once so that the tests, notebook 05 and the TinyGPT mirror of notebook 10 (in haaw/course/nb10.py)
compare against the same thing. torch's ``Linear`` stores the transpose of our W, so the weights are used here
as plain tensors with ``x @ W + b``, exactly as haaw computes it.
"""
from __future__ import annotations


def block_in_torch(block, x, mask, torch, is_causal: bool = False, params: dict | None = None):
    """(output, {id(haaw parameter): torch parameter}) for haaw ``block`` applied to torch ``x``.

    ``mask`` (boolean, True = may attend) or ``is_causal`` are handed to PyTorch's own attention. ``params``:
    torch tensors to use, keyed as returned (made from the block's weights if None)."""
    F = torch.nn.functional
    P = params if params is not None else {id(p): torch.tensor(p.data, requires_grad=True) for p in block.parameters()}

    def linear(layer, h):
        return h @ P[id(layer.weight)] + P[id(layer.bias)]

    def norm(ln, h):
        return F.layer_norm(h, h.shape[-1:], P[id(ln.weight)], P[id(ln.bias)], eps=ln.eps)

    B, T, D = x.shape
    H = block.attn.heads

    def split(h):
        return h.reshape(B, T, H, D // H).transpose(1, 2)

    a = norm(block.ln1, x)
    heads = F.scaled_dot_product_attention(split(linear(block.attn.q, a)), split(linear(block.attn.k, a)),
                                           split(linear(block.attn.v, a)),
                                           attn_mask=None if mask is None else torch.as_tensor(mask),
                                           is_causal=is_causal)
    x = x + linear(block.attn.out, heads.transpose(1, 2).reshape(B, T, D))
    f = linear(block.ff.down, F.gelu(linear(block.ff.up, norm(block.ln2, x)), approximate="tanh"))
    return x + f, P
