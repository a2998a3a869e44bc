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

import dataclasses

import torch

from fa3nn.autocast import to_autocast_dtype
from fa3nn.backends.base import AttnCall, lse_dtype
from fa3nn.checks import (
    FP8_INPUT_DTYPES,
    SUPPORTED_DTYPES,
    as_int,
    as_max_seqlens,
    attention_params,
    check_cu_seqlens_values,
    check_dense,
    check_varlen,
    type_name,
)
from fa3nn.chunks import chunked
from fa3nn.dispatch import Explanation, explain_call
from fa3nn.fa3_compat import check_attention_chunk, check_hints, check_qv, wants_lse, with_qv
from fa3nn.fp8 import DelayedScaling, HadamardRotation, PerTileScaling, as_recipe, fp8_attention_forward
from fa3nn.fp8.inputs import OUT_DTYPE, check_descales, check_fp8_inputs, is_fp8_call
from fa3nn.fp8.quantize import scale_block_k
from fa3nn.ops import attention_call, check_no_function_transforms, refuse_fp8_recipe_span
from fa3nn.sinks import check_sinks, with_sinks
from fa3nn.slots import to_packed
from fa3nn.spans import RowSpan

# Incoherent-processing state for calls without a module, per recipe seed: layer 0's signs, kept on the CPU (the
# rotation matrix moves to q's device per call). A plain dict, created with the default seed at import, so that
# torch.compile reads an existing module instead of tracing the creation of one (which it cannot).
_function_rotations: dict[int, HadamardRotation] = {0: HadamardRotation(0, 0)}


def _function_rotation(seed: int) -> HadamardRotation:
    if seed not in _function_rotations:
        _function_rotations[seed] = HadamardRotation(seed, 0)
    return _function_rotations[seed]


def _function_fp8_state(recipe):
    """fp8= for the functions, which keep no state: per-tile and current scaling need none (per-tile's rotation is
    a cached HadamardRotation(seed, 0)); delayed scaling keeps an amax history, so it needs a module."""
    if isinstance(recipe, DelayedScaling):
        raise ValueError(
            "fp8=DelayedScaling needs state (an amax history kept across calls), which flash_attn_func and "
            "flash_attn_varlen_func do not keep; use fa3nn.FlashAttentionV3(fp8=...) (one per layer, with "
            "layer_idx), or a stateless recipe: fa3nn.PerTileScaling() or fa3nn.CurrentScaling()"
        )
    if isinstance(recipe, PerTileScaling) and recipe.incoherent:
        return _function_rotation(recipe.seed)
    return None


def _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                  dtypes=SUPPORTED_DTYPES) -> tuple[int, int]:
    """The tensors' checks for a packed call (any cu_seqlens given) or a dense one; returns (max_seqlen_q,
    max_seqlen_k), a dense call's from its shapes (it takes no max_seqlen: one given would be ignored, so it is an
    error)."""
    if cu_seqlens_q is not None or cu_seqlens_k is not None:
        check_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dtypes)
        return max_seqlen_q, max_seqlen_k
    check_dense(q, k, v, dtypes)
    if max_seqlen_q is not None or max_seqlen_k is not None:
        raise ValueError(f"max_seqlen_q / max_seqlen_k ({max_seqlen_q}, {max_seqlen_k}) describe a packed (varlen) "
                         "call; a dense call takes its lengths from q and k: give cu_seqlens_q and cu_seqlens_k too, "
                         "or neither max_seqlen")
    return q.shape[1], k.shape[1]


def attention(
    q,
    k,
    v,
    cu_seqlens_q=None,
    cu_seqlens_k=None,
    max_seqlen_q=None,
    max_seqlen_k=None,
    *,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    deterministic=False,
    backend="auto",
    fp8_recipe=None,
    fp8_state=None,
    training=False,
    attention_chunk=0,
    sinks=None,
    sm_margin=0,
):
    """(out, lse): the one path behind flash_attn_func, flash_attn_varlen_func, FlashAttentionV3 and patch_hf.
    Checks the inputs, then runs `fa3nn::fwd`, or with an FP8 recipe (fa3nn.fp8.as_recipe's output) and the
    layer's fp8_state, fa3nn.fp8.fp8_attention_forward (training=True lets delayed scaling record its amax).
    attention_chunk > 0: chunked attention, each chunk a packed sequence (fa3nn.chunks). sinks (nheads,): gpt-oss's
    per-head sink logits (fa3nn.sinks), in the forward kernels (native, Triton), else one pass over the output.
    sm_margin: SMs to leave free for overlapping kernels (fa3nn.fa3_compat; checked by the public functions).
    Under torch.autocast q, k, v run in the autocast dtype (fa3nn.autocast)."""
    q, k, v = to_autocast_dtype(q, k, v)
    check_no_function_transforms(q, k, v, sinks)
    max_seqlen_q, max_seqlen_k = as_max_seqlens(max_seqlen_q, max_seqlen_k)
    if attention_chunk:
        attention_chunk = check_attention_chunk(attention_chunk)
        _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)  # as without chunks
        call = chunked(to_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k), attention_chunk)
        out, lse = attention(call.q, call.k, call.v, call.cu_seqlens_q, call.cu_seqlens_k, call.max_seqlen_q,
                             call.max_seqlen_k, softmax_scale=softmax_scale, causal=causal, window_size=window_size,
                             softcap=softcap, deterministic=deterministic, backend=backend, fp8_recipe=fp8_recipe,
                             fp8_state=fp8_state, training=training, sinks=sinks, sm_margin=sm_margin)
        return call.restore(out, lse)
    max_seqlen_q, max_seqlen_k = _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    params = attention_params(q, softmax_scale, causal, window_size, softcap, deterministic, fp8_recipe, backend,
                              sm_margin)
    if fp8_recipe is not None:
        out, lse = fp8_attention_forward(q, k, v, params, fp8_recipe, fp8_state, cu_seqlens_q, cu_seqlens_k,
                                         max_seqlen_q, max_seqlen_k, training=training, backend=backend)
        if sinks is not None:  # (the FP8 op takes none: one differentiable pass over its output)
            out, lse = with_sinks(out, lse, sinks)
    else:
        out, lse = attention_call(
            q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params.softmax_scale,
            params.window.left, params.window.right, params.softcap, deterministic, backend, sinks=sinks,
            sm_margin=sm_margin,
        )
    # the ops keep float32 inputs' lse in float64 for the backward (fa3nn.backends.base.saved_lse_dtype)
    return out, lse.to(lse_dtype(q.dtype))


def _fp8_inputs_attention(q, k, v, descales, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale,
                          causal, window_size, softcap, deterministic, backend, sm_margin):
    """(out, lse) of FlashAttention-3's FP8 call: e4m3 q, k, v and (batch, nheads_kv) descales (fa3nn.fp8.inputs)."""
    max_seqlen_q, max_seqlen_k = _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                               FP8_INPUT_DTYPES)
    params = attention_params(q, softmax_scale, causal, window_size, softcap, deterministic, None, backend)
    check_descales(descales, q.shape[0] if cu_seqlens_q is None else cu_seqlens_q.shape[0] - 1, k.shape[-2], q.device)
    return torch.ops.fa3nn.fwd_fp8_inputs(
        q, k, v, *descales, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, params.softmax_scale,
        params.window.left, params.window.right, params.softcap, backend, sm_margin,
    )


def _fa3_call(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal, qv, descales,
              window_size, softcap, deterministic, fp8, backend, sinks, sm_margin):
    """(out, lse) for flash_attn_func / flash_attn_varlen_func once FlashAttention-3's extra arguments are checked:
    FP8 inputs, or qv folded into q and k (fa3nn.fa3_compat), then the one attention path."""
    if is_fp8_call(q, *descales):
        if qv is not None:
            raise ValueError("qv with FP8 inputs is not supported: pass qv=None, or bf16 / fp16 tensors")
        check_fp8_inputs(q, k, v, fp8)
        out, lse = _fp8_inputs_attention(q, k, v, descales, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                         softmax_scale, causal, window_size, softcap, deterministic, backend,
                                         sm_margin)
        return (out, lse) if sinks is None else with_sinks(out, lse, sinks)
    if qv is not None:
        _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)  # before the concatenation
        q, k, softmax_scale = with_qv(q, k, v, qv, softmax_scale)
    recipe = as_recipe(fp8)
    return attention(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, softmax_scale=softmax_scale, causal=causal,
        window_size=window_size, softcap=softcap, deterministic=deterministic, backend=backend, fp8_recipe=recipe,
        fp8_state=_function_fp8_state(recipe), sinks=sinks, sm_margin=sm_margin,
    )


def _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k, attention_chunk,
            qv, fp8_inputs):
    """The packed call (fa3nn.slots) a call with slots and / or chunks (fa3nn.chunks) becomes, qv checked against the
    caller's layout before packing reshapes it: the one normalization of _packed_call and explain."""
    call = to_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                     FP8_INPUT_DTYPES if fp8_inputs else SUPPORTED_DTYPES)
    if qv is not None:
        check_qv(qv, q, v)
    return chunked(call, attention_chunk) if attention_chunk else call


def _packed_call(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                 attention_chunk, softmax_scale, causal, qv, descales, window_size, softcap, deterministic, fp8,
                 backend, sinks, sm_margin):
    """(out, lse) in q's layout of a call with slots (fa3nn.slots) and / or chunks (fa3nn.chunks): as a plain packed
    call, FP8 descales repeated for the packed sequences each caller's sequence became."""
    fp8_inputs = is_fp8_call(q, *descales)
    if fp8_inputs:  # before packing, so that the message is about FP8 inputs, not dtypes
        check_fp8_inputs(q, k, v, fp8)
    call = _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                   attention_chunk, None if fp8_inputs else qv, fp8_inputs)
    if fp8_inputs and call.split:  # one descale row per caller's sequence, then per packed sequence
        check_descales(descales, call.batch, call.k.shape[-2], call.q.device)
        descales = tuple(call.per_sequence(d) for d in descales)
    out, lse = _fa3_call(call.q, call.k, call.v, call.cu_seqlens_q, call.cu_seqlens_k, call.max_seqlen_q,
                         call.max_seqlen_k, softmax_scale, causal, None if qv is None else call.pack_like_q(qv),
                         descales, window_size, softcap, deterministic, fp8, backend, sinks, sm_margin)
    return call.restore(out, lse)


def flash_attn_func(
    q,
    k,
    v,
    softmax_scale=None,
    causal=False,
    qv=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size=(-1, -1),
    attention_chunk=0,
    softcap=0.0,
    num_splits=1,
    pack_gqa=None,
    deterministic=False,
    sm_margin=0,
    return_attn_probs=False,
    *,
    return_lse=False,
    sinks=None,
    fp8=None,
    backend="auto",
):
    """Exact attention over dense batches. Returns `out`, or `(out, lse)` when `return_attn_probs` (FlashAttention-3's
    name) or `return_lse`. The parameters are FlashAttention-3's, in its order (fa3nn.fa3_compat says what qv,
    attention_chunk, num_splits, pack_gqa and sm_margin do here); fa3nn's own are keyword-only.

    softmax_scale defaults to headdim ** -0.5. window_size = (left, right), -1 = unbounded; causal=True is the
    window (left, 0) and combines with a left window. deterministic=True (implied by
    torch.use_deterministic_algorithms(True)) asks for a run-to-run bitwise identical backward. backend is "auto",
    "hopper", "triton" or "reference"; fa3nn.explain says which one a call gets.
    fp8 is None (no FP8), a recipe (fa3nn.PerTileScaling(), fa3nn.CurrentScaling()), its name ("per_tile",
    "current") or True (per_tile): the forward quantizes Q, K, V to e4m3, the backward is the bf16 one.
    DelayedScaling keeps state across calls, so it needs a FlashAttentionV3. e4m3 q, k, v with q_descale /
    k_descale / v_descale: FlashAttention-3's FP8 call, forward only (fa3nn.fp8.inputs). sinks (nheads,): gpt-oss's
    per-head sink logits (fa3nn.sinks); lse then includes the sink. attention_chunk > 0 reads the chunk boundaries on
    the host (fa3nn.chunks): under torch.compile a graph break per call, so fullgraph=True refuses it.
    """
    lse_wanted = wants_lse(return_attn_probs, return_lse)
    num_splits, pack_gqa, sm_margin = check_hints(num_splits, pack_gqa, sm_margin)
    attention_chunk = check_attention_chunk(attention_chunk)
    q, k, v, qv = to_autocast_dtype(q, k, v, qv)
    descales = (q_descale, k_descale, v_descale)
    if attention_chunk:  # chunks are packed sequences (fa3nn.chunks)
        out, lse = _packed_call(q, k, v, None, None, None, None, None, None, attention_chunk, softmax_scale, causal,
                                qv, descales, window_size, softcap, deterministic, fp8, backend, sinks, sm_margin)
    else:
        out, lse = _fa3_call(q, k, v, None, None, None, None, softmax_scale, causal, qv, descales, window_size,
                             softcap, deterministic, fp8, backend, sinks, sm_margin)
    return (out, lse) if lse_wanted else out


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    seqused_q=None,
    seqused_k=None,
    softmax_scale=None,
    causal=False,
    qv=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size=(-1, -1),
    attention_chunk=0,
    softcap=0.0,
    num_splits=1,
    pack_gqa=None,
    deterministic=False,
    sm_margin=0,
    return_attn_probs=False,
    *,
    return_lse=False,
    sinks=None,
    fp8=None,
    backend="auto",
):
    """Exact attention over packed sequences: sequence i holds rows cu_seqlens[i]:cu_seqlens[i + 1] and is masked
    on its own (bottom-right per sequence). Same keywords and returns as `flash_attn_func`; lse is (nheads, total_q).

    As in FlashAttention-3, seqused_q / seqused_k (int32 (batch,)) use only the first seqused[i] rows of slot i, and
    a side whose cu_seqlens is None is dense, (batch, seqlen, nheads, headdim) (fa3nn.slots); out and lse then
    follow q's layout. Padding query rows get zeros. Both read seqused / the boundaries on the host to pack the used
    rows, as attention_chunk does its chunks: under torch.compile a graph break per call (fullgraph=True refuses it);
    plain cu_seqlens calls compile without one.
    """
    lse_wanted = wants_lse(return_attn_probs, return_lse)
    num_splits, pack_gqa, sm_margin = check_hints(num_splits, pack_gqa, sm_margin)
    attention_chunk = check_attention_chunk(attention_chunk)
    q, k, v, qv = to_autocast_dtype(q, k, v, qv)
    max_seqlen_q, max_seqlen_k = as_max_seqlens(max_seqlen_q, max_seqlen_k)
    if cu_seqlens_q is None and cu_seqlens_k is None and seqused_q is None and seqused_k is None:
        raise TypeError("flash_attn_varlen_func needs cu_seqlens_q and cu_seqlens_k (int32, (batch + 1,)) with packed "
                        f"(total_tokens, nheads, headdim) q, k, v (or seqused_q / seqused_k with dense slots); got "
                        f"cu_seqlens_q {type_name(cu_seqlens_q)}, cu_seqlens_k {type_name(cu_seqlens_k)}. For a dense "
                        "batch call flash_attn_func")
    out, lse = _packed_call(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                            attention_chunk, softmax_scale, causal, qv, (q_descale, k_descale, v_descale),
                            window_size, softcap, deterministic, fp8, backend, sinks, sm_margin)
    return (out, lse) if lse_wanted else out


def flash_attn_qkvpacked_func(
    qkv,
    softmax_scale=None,
    causal=False,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    window_size=(-1, -1),
    attention_chunk=0,
    softcap=0.0,
    deterministic=False,
    num_heads_q=None,
    sm_margin=0,
    return_attn_probs=False,
    *,
    return_lse=False,
    sinks=None,
    fp8=None,
    backend="auto",
):
    """flash_attn_func on one tensor holding q, k and v, as FlashAttention-3's: qkv (batch, seqlen, 3, nheads,
    headdim), or for MQA/GQA (batch, seqlen, num_heads_q + 2 * nheads_kv, headdim) with num_heads_q given.
    The gradient comes back as one tensor of qkv's shape."""
    if not isinstance(qkv, torch.Tensor) or qkv.dim() not in (4, 5):
        raise TypeError(f"qkv must be a torch.Tensor (batch, seqlen, 3, nheads, headdim) or, with num_heads_q, "
                        f"(batch, seqlen, nheads + 2 * nheads_kv, headdim); got {type_name(qkv)} "
                        f"{tuple(qkv.shape) if isinstance(qkv, torch.Tensor) else ''}")
    num_heads_q = _as_num_heads_q(num_heads_q)
    if qkv.dim() == 5:
        if qkv.shape[2] != 3 or num_heads_q not in (None, qkv.shape[3]):
            raise ValueError(f"a 5-D qkv must be (batch, seqlen, 3, nheads, headdim) with num_heads_q None or nheads, "
                             f"got shape {tuple(qkv.shape)} and num_heads_q {num_heads_q!r}")
        q, k, v = qkv.unbind(dim=2)
    else:
        heads = qkv.shape[2]
        if num_heads_q is None or not 0 < num_heads_q < heads or (heads - num_heads_q) % 2:
            raise ValueError(f"a 4-D qkv (batch, seqlen, nheads + 2 * nheads_kv, headdim) needs num_heads_q, an int in "
                             f"(0, {heads}) leaving an even count for k and v; got {num_heads_q!r}")
        nheads_kv = (heads - num_heads_q) // 2
        q, k, v = qkv.split([num_heads_q, nheads_kv, nheads_kv], dim=2)
    return flash_attn_func(q, k, v, softmax_scale, causal, None, q_descale, k_descale, v_descale, window_size,
                           attention_chunk, softcap, 1, None, deterministic, sm_margin, return_attn_probs,
                           return_lse=return_lse, sinks=sinks, fp8=fp8, backend=backend)


def _as_num_heads_q(value) -> int | None:
    """num_heads_q as a Python int (None stays None; fa3nn.checks.as_int, as max_seqlen): a bool or a float (4.0) is
    refused whichever layout qkv has."""
    return None if value is None else as_int("num_heads_q", value, "an int (the query heads in qkv) or None")


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
    *,
    seqused_q=None,
    seqused_k=None,
    qv=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    attention_chunk=0,
    sinks=None,
    **hints,
) -> Explanation:
    """Which backend `flash_attn_func` (or, given cu_seqlens / seqused, `flash_attn_varlen_func`, a side whose
    cu_seqlens is None then dense as there) would use for this call in the forward and the backward, and why each
    other backend was refused. Runs no kernel. Takes the call's arguments by name (their hints too: num_splits,
    pack_gqa, sm_margin, return_attn_probs / return_lse change no choice), so a call's keywords can be handed over
    as they are; seqused, attention_chunk and qv change the call the backends see (packed slots or chunks, [q, qv]
    against [k, v]), sinks do not. With an fp8 recipe the forward names its FP8 path ("hopper fp8 kernel" on sm_90
    where the native FP8 forward serves the call, else "triton fp8 kernel" on sm_89+ GPUs, "fp8 emulation
    (reference)" elsewhere; fa3nn.dispatch.FP8_FORWARD_PATHS); the backward is bf16. e4m3 q, k, v with their
    descales (FlashAttention-3's FP8 inputs, fa3nn.fp8.inputs) name the FP8 path and no backward. A dense call's
    explain traces under torch.compile (a constant of the graph); one that reads boundaries on the host (cu_seqlens,
    seqused, attention_chunk) raises under fullgraph=True.
    """
    unknown = sorted(set(hints) - _HINTS)
    if unknown:
        raise TypeError(f"explain() got unexpected keyword arguments {unknown}: it takes flash_attn_func's and "
                        f"flash_attn_varlen_func's arguments")
    wants_lse(hints.get("return_attn_probs", False), hints.get("return_lse", False))
    check_hints(hints.get("num_splits", 1), hints.get("pack_gqa"), hints.get("sm_margin", 0))
    attention_chunk = check_attention_chunk(attention_chunk)
    max_seqlen_q, max_seqlen_k = as_max_seqlens(max_seqlen_q, max_seqlen_k)
    q, k, v, qv = to_autocast_dtype(q, k, v, qv)  # as the call would run them
    slots = seqused_q is not None or seqused_k is not None
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None or slots
    if (varlen or attention_chunk) and torch.compiler.is_compiling():
        # (Dynamo's own refusal named a function marked as skipped: the torch.compiler.disable around the read.)
        # Without fullgraph this breaks the graph and explain runs eagerly.
        raise RuntimeError("fa3nn.explain of a varlen or chunked call (cu_seqlens, seqused or attention_chunk given) "
                           "reads boundaries on the host, which torch.compile cannot trace; call explain outside the "
                           "compiled function")
    descales = (q_descale, k_descale, v_descale)
    fp8_inputs = is_fp8_call(q, *descales)
    if fp8_inputs:
        if qv is not None:
            raise ValueError("qv with FP8 inputs is not supported: pass qv=None, or bf16 / fp16 tensors")
        check_fp8_inputs(q, k, v, fp8)
    dtypes = FP8_INPUT_DTYPES if fp8_inputs else SUPPORTED_DTYPES
    if varlen or attention_chunk:  # flash_attn_varlen_func's normalization (fa3nn.slots), then the chunks
        packed = _packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k,
                         attention_chunk, qv, fp8_inputs)
        qv = packed.pack_like_q(qv)
        q, k, v, cu_seqlens_q, cu_seqlens_k = packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k
        max_seqlen_q, max_seqlen_k = packed.max_seqlen_q, packed.max_seqlen_k
    max_seqlen_q, max_seqlen_k = _check_layout(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                               dtypes)
    span = None
    if cu_seqlens_q is not None:  # what the call checks inside its op (a host sync: explain runs no kernel, so it may)
        span = RowSpan.of_starts(
            check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], "max_seqlen_q", max_seqlen_q,
                                    within=True),
            check_cu_seqlens_values("cu_seqlens_k", cu_seqlens_k, k.shape[0], "max_seqlen_k", max_seqlen_k,
                                    within=True), q.shape[0], k.shape[0])
    if sinks is not None:
        check_sinks(sinks, q.shape[-2], q.device)
    params = attention_params(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    if fp8_inputs:  # the FP8 paths with one descale tile per sequence, bf16 out; no backward
        check_descales(descales, q.shape[0] if cu_seqlens_q is None else cu_seqlens_q.shape[0] - 1, k.shape[-2],
                       q.device)
        call = AttnCall.of(q, k, v, params, cu_seqlens_q is not None)
        found = explain_call(backend, dataclasses.replace(call, dtype=OUT_DTYPE), fp8=True, block_k=0,
                             max_seqlen_k=max_seqlen_k)
        return dataclasses.replace(found, backward="none (FP8 inputs have no backward)", backward_refusals={})
    if qv is not None:  # the call runs attention over [q, qv] and [k, v] (fa3nn.fa3_compat.with_qv)
        q, k, softmax_scale = with_qv(q, k, v, qv, softmax_scale)
        params = attention_params(q, softmax_scale, causal, window_size, softcap, deterministic, fp8, backend)
    call = AttnCall.of(q, k, v, params, cu_seqlens_q is not None)
    recipe = as_recipe(fp8)  # DelayedScaling too: the path a FlashAttentionV3(fp8=DelayedScaling(...)) layer takes
    if recipe is not None:
        refuse_fp8_recipe_span(span)
    block_k = scale_block_k(recipe, q.shape[-1]) if recipe is not None else 0
    return explain_call(backend, call, fp8=recipe is not None, block_k=block_k, max_seqlen_k=max_seqlen_k)


# The call's arguments that change no backend choice, checked as the call checks them.
_HINTS = frozenset({"num_splits", "pack_gqa", "sm_margin", "return_attn_probs", "return_lse"})
