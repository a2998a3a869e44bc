"""attention_ref: the plain, unfused oracle every kernel is tested against (FlashAttention-3's test recipe).

Deliberately written independently of the reference backend: dense scores, repeat_interleave for GQA, padding masks
instead of packing. `upcast=True` computes in float32 (float64 for float32/float64 inputs), which gives `out_ref`;
`upcast=False, reorder_ops=True` computes in the inputs' own precision, which gives `out_pt`, the yardstick of what
rounding at that precision costs (see fa3nn.testing.error_ratio).
"""

from __future__ import annotations

import torch

from fa3nn.autocast import autocast_off
from fa3nn.testing.data import as_padding_mask


def _upcast_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32


def _real_tokens(padding_mask, shape, name, device) -> torch.Tensor:
    """The mask `name` as bool `shape` (batch, seqlen) (fa3nn.testing.data.as_padding_mask), all True where None."""
    if padding_mask is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    return as_padding_mask(padding_mask, shape, name).to(device)


def _allowed(query_mask, key_mask, window_size):
    """(batch, 1, seqlen_q, seqlen_k) bool: key j attended by query i. Each row's real tokens, in order, are one
    sequence (what unpad packs: right- and left-padded alike), masked bottom-right on its own true lengths by their
    positions among the real tokens."""
    position_q, position_k = query_mask.cumsum(-1) - 1, key_mask.cumsum(-1) - 1  # (batch, seqlen)
    query_len, key_len = query_mask.sum(-1, keepdim=True), key_mask.sum(-1, keepdim=True)
    i, j = position_q[:, None, :, None], position_k[:, None, None, :]
    diagonal = i + (key_len - query_len)[:, None, :, None]
    allowed = query_mask[:, None, :, None] & key_mask[:, None, None, :]
    left, right = window_size
    if left >= 0:
        allowed = allowed & (j >= diagonal - left)
    if right >= 0:
        allowed = allowed & (j <= diagonal + right)
    return allowed


def attention_ref(
    q,
    k,
    v,
    query_padding_mask=None,
    key_padding_mask=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    softmax_scale=None,
    upcast=True,
    reorder_ops=False,
    intermediate_dtype=None,
):
    """Dense attention, differentiable through autograd. Returns (out, lse).

    q (batch, seqlen_q, nheads, d), k/v (batch, seqlen_k, nheads_kv, d[v]); padding masks are bool or 0/1 integer
    (batch, seqlen_q) and (batch, seqlen_k), True on real tokens, right- or left-padded: each row's real tokens, in
    order, are one sequence (the one unpad packs), masked bottom-right on its own true lengths. Padded query rows and
    rows that attend no key give zeros and lse = -inf. `reorder_ops` scales q before Q·Kᵀ instead of the scores
    after (a different rounding order); `intermediate_dtype` rounds P to that dtype before P·V (FP8 emulation).
    """
    with autocast_off(q.device):  # a caller's torch.autocast must not round the oracle's einsums (fa3nn.autocast)
        dtype_og = q.dtype
        compute = _upcast_dtype(q.dtype) if upcast else q.dtype
        q, k, v = q.to(compute), k.to(compute), v.to(compute)
        batch, seqlen_q, nheads, headdim = q.shape
        seqlen_k, group = k.shape[1], nheads // k.shape[2]
        k = k.repeat_interleave(group, dim=2)
        v = v.repeat_interleave(group, dim=2)
        scale = headdim**-0.5 if softmax_scale is None else softmax_scale
        if reorder_ops:
            scores = torch.einsum("bthd,bshd->bhts", q * scale, k)
        else:
            scores = torch.einsum("bthd,bshd->bhts", q, k) * scale
        if softcap > 0:
            scores = torch.tanh(scores / softcap) * softcap
        query_mask = _real_tokens(query_padding_mask, (batch, seqlen_q), "query_padding_mask", q.device)
        key_mask = _real_tokens(key_padding_mask, (batch, seqlen_k), "key_padding_mask", q.device)
        if causal:
            window_size = (window_size[0], 0)
        allowed = _allowed(query_mask, key_mask, window_size)
        scores = scores.masked_fill(~allowed, float("-inf"))
        lse = torch.logsumexp(scores.to(_upcast_dtype(compute)), dim=-1)
        probs = torch.softmax(scores, dim=-1)
        probs = probs.masked_fill(~allowed.any(-1, keepdim=True), 0.0)  # rows with no key: softmax gave NaN
        if intermediate_dtype is not None:
            probs = probs.to(intermediate_dtype).to(compute)
        out = torch.einsum("bhts,bshd->bthd", probs, v)
        lse_dtype = torch.float64 if dtype_og == torch.float64 else torch.float32
        return out.to(dtype_og), lse.to(lse_dtype)
