"""Shared checks for the Triton backend tests (interpreter and GPU): run fa3nn with backend='triton' and hold out,
lse, dq, dk, dv to FlashAttention-3's error-ratio rule against attention_ref (fp32/fp64 `ref`, own-precision `pt`).
"""

from __future__ import annotations

import torch

from fa3nn import flash_attn_func, flash_attn_varlen_func
from fa3nn.testing import assert_error_ratio, attention_ref, pad, random_padding_mask, random_qkv, unpad


def _grads(outputs, inputs, grad_outputs):
    return torch.autograd.grad(outputs, inputs, grad_outputs)


def check_dense(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device, causal=False,
                window=(-1, -1), softcap=0.0, headdim_v=None, lse_grad=False, deterministic=False):
    """One dense call, forward and backward, every output through the error-ratio rule. Returns the grads."""
    q, k, v = random_qkv(batch, seqlen_q, seqlen_k, nheads, nheads_kv, headdim, dtype, device, headdim_v=headdim_v,
                         requires_grad=True)
    opts = dict(causal=causal, window_size=window, softcap=softcap)
    out, lse = flash_attn_func(q, k, v, **opts, return_lse=True, deterministic=deterministic, backend="triton")
    out_ref, lse_ref = attention_ref(q, k, v, **opts)
    out_pt, lse_pt = attention_ref(q, k, v, **opts, upcast=False, reorder_ops=True)
    assert_error_ratio(out, out_ref, out_pt, "out")
    assert_error_ratio(lse, lse_ref, lse_pt, "lse")

    grad_out = torch.randn_like(out)
    outputs, grad_outputs = [out], [grad_out]
    refs, ref_grads = [out_ref], [grad_out]
    pts, pt_grads = [out_pt], [grad_out]
    if lse_grad:  # the gradient flowing into lse (callers use it only where every row attends a key)
        grad_lse = torch.randn_like(lse)
        outputs.append(lse)
        grad_outputs.append(grad_lse)
        refs.append(lse_ref)
        ref_grads.append(grad_lse)
        pts.append(lse_pt)
        pt_grads.append(grad_lse)
    grads = _grads(outputs, (q, k, v), grad_outputs)
    grads_ref = _grads(refs, (q, k, v), ref_grads)
    grads_pt = _grads(pts, (q, k, v), pt_grads)
    for name, g, g_ref, g_pt in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt):
        assert_error_ratio(g, g_ref, g_pt, name)
    return (q, k, v, grad_out), grads


def check_varlen(batch, max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim, dtype, device, causal=False,
                 window=(-1, -1), softcap=0.0, deterministic=False):
    """Packed sequences of random lengths (some empty): compared with padded attention_ref per sequence."""
    q, k, v = random_qkv(batch, max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim, dtype, device,
                         requires_grad=True)
    mask_q = random_padding_mask(batch, max_seqlen_q, device)
    mask_k = random_padding_mask(batch, max_seqlen_k, device)
    q_packed, cu_q, msq = unpad(q.detach(), mask_q)
    k_packed, cu_k, msk = unpad(k.detach(), mask_k)
    v_packed, _, _ = unpad(v.detach(), mask_k)
    q_packed, k_packed, v_packed = (x.clone().requires_grad_(True) for x in (q_packed, k_packed, v_packed))
    opts = dict(causal=causal, window_size=window, softcap=softcap)
    out, lse = flash_attn_varlen_func(q_packed, k_packed, v_packed, cu_q, cu_k, msq, msk, **opts, return_lse=True,
                                      deterministic=deterministic, backend="triton")
    out_ref, lse_ref = attention_ref(q, k, v, mask_q, mask_k, **opts)
    out_pt, lse_pt = attention_ref(q, k, v, mask_q, mask_k, **opts, upcast=False, reorder_ops=True)
    assert_error_ratio(pad(out, mask_q), out_ref, out_pt, "out")
    # lse only at real rows: (nheads, total) against the reference's (batch, nheads, seqlen)[rows]
    assert_error_ratio(lse.t(), lse_ref.transpose(1, 2)[mask_q], lse_pt.transpose(1, 2)[mask_q], "lse")

    grad_out = torch.randn_like(out_ref).masked_fill(~mask_q[:, :, None, None], 0.0)
    grads = _grads(out, (q_packed, k_packed, v_packed), unpad(grad_out, mask_q)[0])
    grads_ref = _grads(out_ref, (q, k, v), grad_out)
    grads_pt = _grads(out_pt, (q, k, v), grad_out)
    for name, g, g_ref, g_pt, mask in zip(("dq", "dk", "dv"), grads, grads_ref, grads_pt, (mask_q, mask_k, mask_k)):
        assert_error_ratio(g, g_ref[mask], g_pt[mask], name)
