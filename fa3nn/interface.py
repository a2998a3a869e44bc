"""The public, FlashAttention-3-compatible functions. Switching `from flash_attn_interface import ...` to
`from fa3nn import ...` is all a user has to do.

Layouts
    dense:  q (batch, seqlen_q, nheads, headdim); k, v (batch, seqlen_k, nheads_kv, headdim)
            out (batch, seqlen_q, nheads, headdim); lse (batch, nheads, seqlen_q), float32
    varlen: q (total_q, nheads, headdim); k, v (total_k, nheads_kv, headdim); cu_seqlens_* int32 (batch + 1,)
            out (total_q, nheads, headdim); lse (nheads, total_q), float32
nheads % nheads_kv == 0 gives MQA/GQA: query head h reads K/V head h // (nheads // nheads_kv), never a repeated copy.

Masks align bottom-right (see fa3nn.masks for the rule and a picture). softcap > 0 replaces each scaled score s by
softcap * tanh(s / softcap) before masking (Gemma-2). A query row that may attend no key returns zeros and lse = -inf.
lse is the natural-log sum of exp of the scaled (and soft-capped) scores; it is float64 only for float64 inputs.
"""

from __future__ import annotations

from fa3nn.backends.base import AttnCall, AttnParams
from fa3nn.checks import check_dense, check_options, check_varlen
from fa3nn.dispatch import Explanation, check_backend_name, explain_call
from fa3nn.masks import Window
from fa3nn.ops import attention_forward


def _normalize(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend):
    check_options(softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    check_backend_name(backend)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    return AttnParams(scale, Window.from_args(causal, window_size), float(softcap), deterministic)


def flash_attn_func(
    q,
    k,
    v,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    return_lse=False,
    deterministic=False,
    fp8=None,
    backend="auto",
):
    """Exact attention over dense batches. Returns `out`, or `(out, lse)` when `return_lse`.

    softmax_scale defaults to headdim ** -0.5. window_size = (left, right), -1 = unbounded; causal=True is the
    window (left, 0) and combines with a left window. deterministic=True asks for a run-to-run bitwise identical
    backward. backend is "auto", "hopper", "triton" or "reference"; fa3nn.explain says which one a call gets.
    """
    check_dense(q, k, v)
    params = _normalize(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    out, lse = attention_forward(
        q, k, v, None, None, q.shape[1], k.shape[1], params.softmax_scale, params.window.left,
        params.window.right, params.softcap, deterministic, backend,
    )
    return (out, lse) if return_lse else out


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    return_lse=False,
    deterministic=False,
    fp8=None,
    backend="auto",
):
    """Exact attention over packed sequences: sequence i holds rows cu_seqlens[i]:cu_seqlens[i + 1] and is masked
    on its own (bottom-right per sequence). Same keywords and returns as `flash_attn_func`; lse is (nheads, total_q).
    """
    check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    params = _normalize(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    out, lse = attention_forward(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params.softmax_scale,
        params.window.left, params.window.right, params.softcap, deterministic, backend,
    )
    return (out, lse) if return_lse else out


def explain(
    q,
    k,
    v,
    cu_seqlens_q=None,
    cu_seqlens_k=None,
    max_seqlen_q=None,
    max_seqlen_k=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    deterministic=False,
    fp8=None,
    backend="auto",
) -> Explanation:
    """Which backend `flash_attn_func` (or, given cu_seqlens, `flash_attn_varlen_func`) would use for this call in
    the forward and the backward, and why each other backend was refused. Runs no kernel.
    """
    varlen = cu_seqlens_q is not None
    if varlen:
        check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    else:
        check_dense(q, k, v)
    params = _normalize(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    return explain_call(backend, AttnCall.of(q, k, v, params, varlen))
