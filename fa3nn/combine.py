"""flash_attn_combine: attention over several key blocks from each block's output and lse (FlashAttention-3's).

Attention over keys split into blocks S_1 .. S_n is a weighted sum of the attentions over each block: with o_s and
lse_s the output and log-sum-exp of block s, lse = log sum_s exp(lse_s) and o = sum_s exp(lse_s - lse) o_s. This is
how split-KV decoding, ring / context-parallel attention and cascade attention put partial results together.

    out, lse = flash_attn_combine(out_partial, lse_partial)
    out_partial  float32 (num_splits, batch, seqlen, nheads, headdim)
    lse_partial  float32 (num_splits, batch, seqlen, nheads)
    out          (batch, seqlen, nheads, headdim) in out_dtype (default float32)
    lse          float32 (batch, seqlen, nheads)

These are FlashAttention-3's layouts (its fwd_combine). The lse that flash_attn_func returns (return_attn_probs=True)
is (batch, nheads, seqlen), heads before positions, so it is not lse_partial's layout: stack each block's
lse.transpose(-1, -2) (a view). Passing it untransposed is refused when seqlen != nheads but silently wrong when they
are equal. A packed call's out (total_q, nheads, headdim) and lse (nheads, total_q) are a batch of one:
out.unsqueeze(0) and lse.transpose(0, 1).unsqueeze(0). The combined lse comes back as (batch, seqlen, nheads).

A block no query row attends (lse_s = -inf) contributes nothing, whatever its output holds (FlashAttention-3 leaves
such rows unwritten); a row no block attends gets zeros and lse = -inf. A NaN or +inf lse_s is no such block: that
row's out and lse are NaN. Written in PyTorch (one pass over the partial outputs; FlashAttention-3 has a kernel) and
differentiable, so it can sit inside a training step.
"""

from __future__ import annotations

import torch

from fa3nn.checks import type_name

OUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check(out_partial, lse_partial, out, out_dtype) -> torch.dtype:
    for name, t, dims in (("out_partial", out_partial, 5), ("lse_partial", lse_partial, 4)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a float32 torch.Tensor, got {type_name(t)}")
        if t.dtype != torch.float32 or t.dim() != dims:
            raise ValueError(f"{name} must be float32 with {dims} dims, got {t.dtype} of shape {tuple(t.shape)}")
    if tuple(lse_partial.shape) != tuple(out_partial.shape[:4]) or lse_partial.device != out_partial.device:
        flipped = tuple(lse_partial.shape) == (*out_partial.shape[:2], out_partial.shape[3], out_partial.shape[2])
        hint = (" (the (batch, nheads, seqlen) layout flash_attn_func returns: stack lse.transpose(-1, -2))"
                if flipped else "")
        raise ValueError(f"lse_partial must be (num_splits, batch, seqlen, nheads) = {tuple(out_partial.shape[:4])} on "
                         f"{out_partial.device}, got {tuple(lse_partial.shape)} on {lse_partial.device}{hint}")
    if out_dtype is None:
        out_dtype = out.dtype if isinstance(out, torch.Tensor) else torch.float32
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"out_dtype must be one of {OUT_DTYPES}, got {out_dtype!r}")
    if out is not None:
        expected = (*out_partial.shape[1:],)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected or out.dtype != out_dtype or (
                out.device != out_partial.device):
            raise ValueError(f"out must be a {out_dtype} tensor of shape {expected} on {out_partial.device}, got "
                             f"{type_name(out)} {getattr(out, 'dtype', '')} {tuple(getattr(out, 'shape', ()))}")
    return out_dtype


def flash_attn_combine(out_partial, lse_partial, out=None, out_dtype=None):
    """(out, lse) of the attention over all blocks from the blocks' (module docstring). `out`, if given, receives
    the result (and is returned)."""
    out_dtype = _check(out_partial, lse_partial, out, out_dtype)
    # logsumexp over a row no block attends is -inf, and its backward NaN even for a zero gradient: such rows take a
    # finite stand-in and get -inf back afterwards
    anywhere = torch.isfinite(lse_partial).any(0)
    lse = torch.where(anywhere, torch.logsumexp(torch.where(anywhere[None], lse_partial, 0.0), dim=0), float("-inf"))
    attended = torch.isfinite(lse_partial) & anywhere[None]
    weights = torch.where(attended, torch.exp(lse_partial - torch.where(anywhere, lse, 0.0)[None]), 0.0)
    combined = torch.where(attended[..., None], weights[..., None] * out_partial, 0.0).sum(0)
    # a NaN or +inf lse_s is no finite block and no empty one (-inf): the row has no defined value
    undefined = (torch.isnan(lse_partial) | (lse_partial == float("inf"))).any(0)
    lse = torch.where(undefined, float("nan"), lse)
    combined = torch.where(undefined[..., None], float("nan"), combined)
    if out is None:
        return combined.to(out_dtype), lse
    out.copy_(combined)
    return out, lse
