"""FlashAttention-3's flash_attn_with_kvcache: new queries attend to a KV cache, after the new keys / values (if
given) are written into it in place. Decoding and evaluation loops call it; it has no gradient (as FlashAttention-3's).

The cache, as FlashAttention-3 reads it:
- plain: k_cache (batch_cache, seqlen_cache, nheads_k, headdim), v_cache (..., headdim_v); sequence b is row
  cache_batch_idx[b] (default b). Its keys are cache rows [cache_leftpad[b], cache_seqlens[b]) (leftpad default 0,
  cache_seqlens default seqlen_cache), and k / v (batch, seqlen_new, nheads_k, headdim) are written at rows
  cache_seqlens[b] .. cache_seqlens[b] + seqlen_new - 1 first, which must fit in seqlen_cache.
- paged: k_cache (num_pages, page_size, nheads_k, headdim) with page_table (batch, pages_per_seq) int32; logical row
  r of sequence b is page page_table[b, r // page_size], row r % page_size; entries past the pages a sequence
  reads (ceil((cache_seqlens[b] + its new keys) / page_size)) are ignored, as padding. No cache_batch_idx or
  cache_leftpad.
Packed instead of dense: q (total_q, nheads, headdim) with cu_seqlens_q (batch + 1,) and max_seqlen_q, and k / v
(total_new, nheads_k, headdim) with cu_seqlens_k_new, each sequence its own count (0 included).
Attention then runs over keys of length cache_seqlens - cache_leftpad + the sequence's new keys, masks aligned
bottom-right (the queries are the last positions), through flash_attn_varlen_func's dense slots with seqused_k.

Rotary (rotary_cos / rotary_sin (seqlen_ro, rotary_dim / 2), rotary_interleaved: GPT-J pairs (x0, x1), (x2, x3) ...;
else GPT-NeoX halves; with k / v only, as FlashAttention-3) rotates the first rotary_dim columns of the new keys at
cache rows cache_seqlens + i (FlashAttention-3 counts rotary positions from the cache's row 0, left padding
included), and q at those positions when causal or windowed, else every query at cache_seqlens; a window side that
reaches every key (left >= the cache's capacity - 1, right >= seqlen_q - 1) is no window there, as in FlashAttention-3.

Unlike FlashAttention-3's single kernel, a cache that is not plain-and-in-order (cache_batch_idx, cache_leftpad or a
page table) is gathered into a dense copy first; the write, the rotary and the gather are torch operations. Every
index and length is checked in one host read per call (a sync; each new cu_seqlens tensor is read once more, and
flash_attn_varlen_func reads seqused_k): FlashAttention-3 checks none of them and writes past the cache's end
instead. The host read is why a call cannot be captured in a CUDA graph (FlashAttention-3's can), which is refused.
"""

from __future__ import annotations

import dataclasses

import torch

from fa3nn.autocast import dtype_under_autocast
from fa3nn.backends.base import AttnCall
from fa3nn.checks import (
    FP8_INPUT_DTYPES,
    as_int,
    as_max_seqlen,
    attention_params,
    check_bool,
    check_cu_seqlens_tensor,
    check_cu_seqlens_values,
    check_qkv_consistency,
    check_tensor,
    check_window_size,
    type_name,
)
from fa3nn.dispatch import resolve
from fa3nn.fa3_compat import check_attention_chunk, check_hints
from fa3nn.interface import flash_attn_varlen_func
from fa3nn.packed import sequence_positions

# FlashAttention-3 arguments this function refuses, with what to do instead.
_REFUSED = {
    "qv": "call flash_attn_func with the concatenations [q, qv] and [k, v] over the gathered cache",
    "q_descale": "FP8 caches are not read here; dequantize the cache or use flash_attn_func with descales",
    "k_descale": "FP8 caches are not read here; dequantize the cache or use flash_attn_func with descales",
    "v_descale": "FP8 caches are not read here; dequantize the cache or use flash_attn_func with descales",
    "rotary_seqlens": "rotary positions follow cache_seqlens here",
    "scheduler_metadata": "FlashAttention-3's precomputed schedule does not apply to fa3nn's kernels (fa3nn's "
                          "get_scheduler_metadata returns None, which this call takes)",
}


def _what(value) -> str:
    """A value as error messages name it: a tensor's dtype, shape and device, else its type."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of dtype {value.dtype}, shape {tuple(value.shape)}, device {value.device}"
    return type_name(value)


def _int_vector(name: str, value, batch: int, device: torch.device, what: str) -> torch.Tensor:
    """An integer (batch,) tensor on `device` from an int (a numpy integer too: fa3nn.checks.as_int) or an int32 /
    int64 tensor of that shape; its values are checked later, with every other length, in one host read
    (_host_values)."""
    if not isinstance(value, torch.Tensor):
        value = as_int(name, value, f"an int or an int32 tensor (batch,) ({what})")
        if not 0 <= value < 2**31:  # (torch.full raised a bare OverflowError past int64)
            raise ValueError(f"{name} entries must be in [0, 2**31), got values in [{value}, {value}]")
        return torch.full((batch,), value, dtype=torch.int64, device=device)
    if value.dtype not in (torch.int32, torch.int64) or value.dim() != 1:
        raise TypeError(f"{name} must be an int or an int32 tensor (batch,) ({what}), got {_what(value)}")
    if value.shape[0] != batch:
        raise ValueError(f"{name} must have one entry per sequence (q's batch, {batch}), got {_what(value)}")
    if value.device != device:
        raise ValueError(f"{name} must be on q's device {device}, got {value.device}")
    return value


def _host_values(**scalars: torch.Tensor) -> dict[str, int]:
    """Zero-dim integer / bool tensors read on the host together: one sync for every check of a call."""
    names = list(scalars)
    values = torch.stack([scalars[n].to(torch.int64) for n in names]).tolist()
    return dict(zip(names, values))


def _check_cache_tensor(name: str, t, like: torch.Tensor | None, layout: str, ndim: int = 4) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != ndim:
        raise TypeError(f"{name} must be a {ndim}-D torch.Tensor {layout}, got {_what(t)}")
    if like is not None and (t.dtype != like.dtype or t.device != like.device):
        raise TypeError(f"{name} must match q's dtype and device ({like.dtype}, {like.device}), got "
                        f"{t.dtype}, {t.device}")


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
           interleaved: bool) -> torch.Tensor:
    """x (..., heads, d) with its first 2 * cos.shape[1] columns rotated by the angles of rows positions (x's leading
    shape) of cos / sin (float32 arithmetic, float64 for float64 x; x's dtype out); the other columns unchanged."""
    half = cos.shape[1]
    compute = torch.promote_types(x.dtype, torch.float32)
    c = cos[positions].to(compute).unsqueeze(-2)  # (..., 1, half)
    s = sin[positions].to(compute).unsqueeze(-2)
    rot = x[..., : 2 * half].to(compute)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = rot[..., :half], rot[..., half:]
        out = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return torch.cat((out.to(x.dtype), x[..., 2 * half :]), dim=-1)


def _check_rotary_reach(last: int, rows: int, what: str) -> None:
    if last >= rows:
        raise ValueError(f"rotary_cos / rotary_sin have {rows} rows, but {what} reach position {last}; pass tables "
                         "covering every position of the cache")


def _moving_rotary(causal: bool, window_size: tuple[int, int], seqlen_q: int, capacity: int) -> bool:
    """Whether query i is rotated at cache_seqlens + i (else every query at cache_seqlens), by FlashAttention-3's
    rule: its mha_fwd (hopper/flash_api.cpp) first makes unbounded (-1) a side that reaches every key, the left one
    when >= seqlen_k - 1 (seqlen_k: the cache's capacity, pages per sequence x page_size when paged), the right one
    when >= seqlen_q - 1 (max_seqlen_q when packed); its kernels then rotate at moving positions for a causal or local
    call only (Rotary's FixedPosition = !(Is_causal || Is_local)). Such a side masks no key, so only the rotary
    sees the difference."""
    left = -1 if window_size[0] >= capacity - 1 else window_size[0]
    right = -1 if window_size[1] >= seqlen_q - 1 else window_size[1]
    return causal or (left, right) != (-1, -1)


def _tokens(cu: torch.Tensor | None, total: int, batch: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each of `total` tokens' sequence and index in it: packed by cu (batch + 1,), else total / batch per sequence."""
    if cu is not None:
        return sequence_positions(cu, total)
    token = torch.arange(total, device=device)
    per_seq = max(total // batch, 1)
    return token // per_seq, token % per_seq


@torch.no_grad()
def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    qv=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    page_table=None,
    cu_seqlens_q=None,
    cu_seqlens_k_new=None,
    max_seqlen_q=None,
    rotary_seqlens=None,
    q_descale=None,
    k_descale=None,
    v_descale=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    attention_chunk=0,
    softcap=0.0,
    rotary_interleaved=True,
    scheduler_metadata=None,
    num_splits=0,
    pack_gqa=None,
    sm_margin=0,
    return_softmax_lse=False,
    *,
    backend="auto",
):
    """Attention of q (batch, seqlen_q, nheads, headdim), or packed by cu_seqlens_q, over the cache, k / v written
    into it first (module docstring). Returns out of q's layout with headdim_v, or with return_softmax_lse (out, lse)
    (lse (batch, nheads, seqlen_q), or (nheads, total_q) packed; FlashAttention-3's returns two split-KV accumulators
    after them, so `out, lse, *_ = ...` reads both). FlashAttention-3's parameters in its order; backend as
    flash_attn_func's."""
    if isinstance(q, torch.Tensor) and q.is_cuda and torch.cuda.is_current_stream_capturing():
        # (torch's own error named a CPU-CUDA copy, not this function or why)
        raise RuntimeError("flash_attn_with_kvcache reads cache_seqlens and the other lengths and indices on the host "
                           "(one read per call, to check them and size the attention; FlashAttention-3 reads them in "
                           "its kernel), which a CUDA graph cannot capture: call it outside CUDA graph capture")
    given = dict(qv=qv, q_descale=q_descale, k_descale=k_descale, v_descale=v_descale, rotary_seqlens=rotary_seqlens,
                 scheduler_metadata=scheduler_metadata)
    for name, value in given.items():
        if value is not None:
            raise NotImplementedError(f"flash_attn_with_kvcache: {name} is not supported by fa3nn; {_REFUSED[name]}")
    if check_attention_chunk(attention_chunk) != 0:
        raise NotImplementedError(f"flash_attn_with_kvcache: attention_chunk must be 0 here (chunked attention over a "
                                  f"cache is not supported), got {attention_chunk!r}")
    num_splits, pack_gqa, sm_margin = check_hints(num_splits, pack_gqa, sm_margin)
    check_bool("causal", causal)
    check_bool("rotary_interleaved", rotary_interleaved)
    check_bool("return_softmax_lse", return_softmax_lse)
    window_size = check_window_size(window_size)
    packed_q = cu_seqlens_q is not None
    if packed_q:
        if not isinstance(q, torch.Tensor) or q.dim() != 3:
            raise TypeError(f"q must be a 3-D torch.Tensor (total_q, nheads, headdim) with cu_seqlens_q, got "
                            f"{_what(q)}")
        check_cu_seqlens_tensor("cu_seqlens_q", cu_seqlens_q, q.device)
        max_seqlen_q = as_max_seqlen("max_seqlen_q", max_seqlen_q)
        if max_seqlen_q is None or max_seqlen_q < 1:
            raise ValueError(f"max_seqlen_q must be a positive int with cu_seqlens_q (the longest query run), got "
                             f"{max_seqlen_q!r}")
        batch, device = cu_seqlens_q.numel() - 1, q.device
    else:
        if not isinstance(q, torch.Tensor) or q.dim() != 4:
            raise TypeError(f"q must be a 4-D torch.Tensor (batch, seqlen_q, nheads, headdim), got {_what(q)}")
        # FlashAttention-3 takes max_seqlen_q with dense q too (a decode loop's 1) and reads q's seqlen instead: a
        # bound that holds it is accepted and unused, a smaller one refused (it would describe other queries)
        max_seqlen_q = as_max_seqlen("max_seqlen_q", max_seqlen_q)
        if max_seqlen_q is not None and max_seqlen_q < q.shape[1]:
            raise ValueError(f"max_seqlen_q ({max_seqlen_q}) is smaller than dense q's seqlen_q ({q.shape[1]}); with "
                             "dense q it may be left out (q's shape gives the length)")
        batch, device = q.shape[0], q.device
    if batch == 0:
        raise ValueError(f"q has no sequences (batch 0, shape {tuple(q.shape)}): nothing to attend or write")
    if packed_q:  # before any write: the packed queries' boundaries (values read once per tensor)
        check_cu_seqlens_values("cu_seqlens_q", cu_seqlens_q, q.shape[0], "max_seqlen_q", max_seqlen_q, within=True)
    paged = page_table is not None
    layout = "(num_pages, page_size, nheads_k, headdim)" if paged else "(batch_cache, seqlen_cache, nheads_k, headdim)"
    _check_cache_tensor("k_cache", k_cache, q, layout)
    _check_cache_tensor("v_cache", v_cache, q, layout)
    if k_cache.shape[:3] != v_cache.shape[:3]:
        raise ValueError(f"k_cache and v_cache must agree on all but the head dim, got {tuple(k_cache.shape)} and "
                         f"{tuple(v_cache.shape)}")
    # What the attention call below checks, checked before the cache is written: a refused call leaves it unchanged.
    if q.dtype in FP8_INPUT_DTYPES:
        raise NotImplementedError(f"flash_attn_with_kvcache: FP8 ({q.dtype}) q and caches are not supported by fa3nn; "
                                  f"{_REFUSED['q_descale']}")
    check_tensor("q", q, q.dim(), "(total_q, nheads, headdim)" if packed_q else "(batch, seqlen_q, nheads, headdim)")
    check_qkv_consistency(q, k_cache, v_cache, batch_dims=0, names=("q", "k_cache", "v_cache"))
    params = attention_params(q, softmax_scale, causal, window_size, softcap, False, None, backend, sm_margin)
    if backend != "auto":  # a forced backend that cannot serve the call raises UnsupportedCall (auto always finds one)
        # in the dtype the attention runs in: flash_attn_varlen_func takes q, k, v in autocast's
        call = AttnCall.of(q, k_cache, v_cache, params, varlen=True)
        resolve(backend, dataclasses.replace(call, dtype=dtype_under_autocast(q.dtype, q.device)))

    if paged:
        if cache_batch_idx is not None or cache_leftpad is not None:
            raise ValueError("cache_batch_idx and cache_leftpad index a plain cache; with a page_table the table says "
                             "where each sequence's rows are")
        if (not isinstance(page_table, torch.Tensor) or page_table.dtype != torch.int32 or page_table.dim() != 2
                or page_table.shape[0] != batch or page_table.device != device or page_table.shape[1] == 0):
            raise TypeError(f"page_table must be an int32 tensor (batch={batch}, pages_per_seq >= 1) on {device}, got "
                            f"{_what(page_table)}")
        page_size = k_cache.shape[1]
        if page_size == 0:  # (the page arithmetic below divides by it)
            raise ValueError(f"k_cache's pages must hold at least one row (page_size = k_cache.shape[1]), got shape "
                             f"{tuple(k_cache.shape)}")
        capacity = page_table.shape[1] * page_size
        rows = None
    else:
        capacity = k_cache.shape[1]
        rows = None
        if cache_batch_idx is None:
            if k_cache.shape[0] != batch:
                raise ValueError(f"k_cache holds {k_cache.shape[0]} sequences and q {batch}; pass cache_batch_idx "
                                 "to pick the cache row of each")
        else:
            rows = _int_vector("cache_batch_idx", cache_batch_idx, batch, device, "the cache row of each sequence")
    leftpad = None if cache_leftpad is None else _int_vector(
        "cache_leftpad", cache_leftpad, batch, device, "the first cache row of each sequence")
    ends = _int_vector("cache_seqlens", capacity if cache_seqlens is None else cache_seqlens, batch, device,
                       "each sequence's cache end before the new keys")

    # The new keys / values: dense (batch, seqlen_new, ...) or packed (total_new, ...) by cu_seqlens_k_new.
    if (k is None) != (v is None):
        raise TypeError(f"k and v come together (the new keys and values), got k {type_name(k)}, v {type_name(v)}")
    if cu_seqlens_k_new is not None and k is None:
        raise ValueError("cu_seqlens_k_new packs the new keys: pass k and v (total_new, nheads_k, headdim) with it")
    new_len = torch.zeros(batch, dtype=torch.int64, device=device)
    if k is not None:
        packed_k = cu_seqlens_k_new is not None
        dims = "(total_new, nheads_k, " if packed_k else "(batch, seqlen_new, nheads_k, "
        _check_cache_tensor("k", k, q, dims + "headdim)", ndim=3 if packed_k else 4)
        _check_cache_tensor("v", v, q, dims + "headdim_v)", ndim=3 if packed_k else 4)
        lead = k.shape[:-2]
        if (packed_k and k.shape[0] != v.shape[0]) or (not packed_k and (k.shape[0] != batch or v.shape[:2] != lead)) \
                or (k.shape[-2:], v.shape[-2:]) != (k_cache.shape[2:], v_cache.shape[2:]):
            raise ValueError(f"k / v must be {dims}headdim) with the cache's heads and head dims (batch {batch}), got "
                             f"k {tuple(k.shape)}, v {tuple(v.shape)} for caches {tuple(k_cache.shape)}, "
                             f"{tuple(v_cache.shape)}")
        if cache_seqlens is None:  # (as FlashAttention-3 refuses it)
            raise ValueError("k / v are written at each sequence's cache_seqlens: pass cache_seqlens (an int or an "
                             "int32 tensor (batch,), each sequence's cache rows before the new keys) with them")
        if packed_k:
            check_cu_seqlens_tensor("cu_seqlens_k_new", cu_seqlens_k_new, device, owner="k")
            if cu_seqlens_k_new.shape != (batch + 1,):
                raise ValueError(f"cu_seqlens_k_new must have batch + 1 = {batch + 1} entries (as cu_seqlens_q or q), "
                                 f"got shape {tuple(cu_seqlens_k_new.shape)}")
            check_cu_seqlens_values("cu_seqlens_k_new", cu_seqlens_k_new, k.shape[0], "", None)
            new_len = cu_seqlens_k_new.long().diff()
        else:
            new_len = torch.full((batch,), k.shape[1], dtype=torch.int64, device=device)
    q_len = cu_seqlens_q.long().diff() if packed_q else torch.full((batch,), q.shape[1], dtype=torch.int64,
                                                                   device=device)

    # Every value check of the call in one host read.
    pad = torch.zeros((), dtype=torch.int64, device=device) if leftpad is None else leftpad.long()
    scalars = dict(ends_min=ends.min(), ends_max=ends.max(), pad_min=pad.min(), pad_max=pad.max(),
                   pad_past_end=(pad > ends.long()).any(), longest=(ends.long() - pad + new_len).max(),
                   reach=(ends.long() + new_len).max(), q_reach=(ends.long() + q_len).max())
    if rows is not None:
        ordered = rows.long().sort().values
        scalars.update(rows_min=ordered[0], rows_max=ordered[-1], rows_repeat=(ordered[1:] == ordered[:-1]).any())
    if k is not None:
        k_seq, k_idx = _tokens(cu_seqlens_k_new, k.shape[0] * (1 if cu_seqlens_k_new is not None else k.shape[1]),
                               batch, device)
        logical = ends.long()[k_seq] - pad.expand(batch)[k_seq] + k_idx  # the new rows' logical positions
    if paged:
        # Only the entries a sequence reads are checked (and gathered): FlashAttention-3 ignores the rest, which
        # padded page tables fill with anything (-1 often).
        pages_used = torch.div(ends.long() + new_len + page_size - 1, page_size, rounding_mode="floor")
        used = torch.arange(page_table.shape[1], device=device)[None, :] < pages_used[:, None]
        in_range = (page_table >= 0) & (page_table < k_cache.shape[0])
        scalars.update(pages_bad=(used & ~in_range).any(), pages_min=torch.where(used, page_table, 2**31 - 1).min(),
                       pages_max=torch.where(used, page_table, -(2**31)).max())
        if k is not None and k_seq.numel():  # the (page, row) of every new row, for repeats
            page_index = torch.div(logical, page_size, rounding_mode="floor").clamp_max(page_table.shape[1] - 1)
            slots = page_table.long()[k_seq, page_index] * page_size + logical % page_size
            slots = slots.sort().values
            scalars.update(slots_repeat=(slots[1:] == slots[:-1]).any())
    h = _host_values(**scalars)
    for name, lo, hi in (("cache_seqlens", h["ends_min"], h["ends_max"]), ("cache_leftpad", h["pad_min"], h["pad_max"]),
                         ("cache_batch_idx", h.get("rows_min", 0), h.get("rows_max", 0))):
        if not 0 <= lo <= hi < 2**31:
            raise ValueError(f"{name} entries must be in [0, 2**31), got values in [{lo}, {hi}]")
    if h["pad_past_end"] or h["reach"] > capacity:
        raise ValueError(f"the cache rows must satisfy 0 <= cache_leftpad <= cache_seqlens and cache_seqlens + the "
                         f"sequence's new keys <= {capacity} (the cache's rows per sequence); got cache_leftpad in "
                         f"[{h['pad_min']}, {h['pad_max']}], cache_seqlens in [{h['ends_min']}, {h['ends_max']}], "
                         f"the furthest write ending at row {h['reach']}")
    if rows is not None and h["rows_max"] >= k_cache.shape[0]:
        raise ValueError(f"cache_batch_idx entries must index k_cache's {k_cache.shape[0]} rows, got values in "
                         f"[{h['rows_min']}, {h['rows_max']}]")
    if rows is not None and k is not None and h["rows_repeat"]:
        raise ValueError("cache_batch_idx repeats a cache row while k / v are written: two sequences would write the "
                         "same rows")
    if paged and h["pages_bad"]:
        raise ValueError(f"page_table entries a sequence reads (its first ceil((cache_seqlens + new keys) / page_size "
                         f"= {page_size})) must index k_cache's {k_cache.shape[0]} pages, got values in "
                         f"[{h['pages_min']}, {h['pages_max']}]")
    if h.get("slots_repeat"):
        raise ValueError("page_table maps two sequences' new rows to the same page row: one write would overwrite "
                         "the other")
    leftpad = torch.zeros(batch, dtype=torch.int64, device=device) if leftpad is None else leftpad.long()
    ends = ends.long()
    length_max = h["longest"]

    if (rotary_cos is None) != (rotary_sin is None):
        raise TypeError("rotary_cos and rotary_sin come together")
    if rotary_cos is not None:
        for name, t in (("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin)):
            if (not isinstance(t, torch.Tensor) or t.dim() != 2 or t.device != device or not t.is_floating_point()
                    or t.shape != rotary_cos.shape):
                raise TypeError(f"{name} must be a floating tensor (seqlen_ro, rotary_dim / 2) on {device}, both of "
                                f"one shape; got {_what(t)}")
        if not 0 < 2 * rotary_cos.shape[1] <= q.shape[-1]:
            raise ValueError(f"rotary_dim (2 x rotary_cos.shape[1] = {2 * rotary_cos.shape[1]}) must be in (0, "
                             f"headdim = {q.shape[-1]}]")
        if k is None:
            raise TypeError("rotary_cos / rotary_sin rotate the new keys together with the queries: pass k and v too "
                            "(FlashAttention-3 refuses rotary without them as well)")
        _check_rotary_reach(h["reach"] - 1, rotary_cos.shape[0], "the new keys")
        k_positions = (ends[k_seq] + k_idx).view(k.shape[:-2])
        k = rotate(k, rotary_cos, rotary_sin, k_positions, rotary_interleaved)
        local = _moving_rotary(causal, window_size, max_seqlen_q if packed_q else q.shape[1], capacity)
        _check_rotary_reach(h["q_reach"] - 1 if local else h["ends_max"], rotary_cos.shape[0], "the queries")
        q_seq, q_idx = _tokens(cu_seqlens_q, q.shape[0] if packed_q else q.shape[0] * q.shape[1], batch, device)
        if packed_q:  # rows outside every sequence (fa3nn.spans) are never read: rotated at position 0
            outside = (q_idx < 0) | (q_seq >= batch)
            q_seq = q_seq.clamp_max(batch - 1)  # (a valid index into ends; the position is replaced below)
        q_positions = (ends[q_seq] + (q_idx if local else 0)).view(q.shape[:-2])
        if packed_q:
            q_positions = q_positions.masked_fill(outside, 0)
        q = rotate(q, rotary_cos, rotary_sin, q_positions, rotary_interleaved)

    if k is not None:  # the new keys / values into the cache, in place
        flat_k, flat_v = k.reshape(-1, *k.shape[-2:]), v.reshape(-1, *v.shape[-2:])
        if paged:
            page = page_table.long()[k_seq, torch.div(logical, page_size, rounding_mode="floor")]
            k_cache[page, logical % page_size] = flat_k
            v_cache[page, logical % page_size] = flat_v
        else:
            cache_row = k_seq if rows is None else rows.long()[k_seq]
            k_cache[cache_row, leftpad[k_seq] + logical] = flat_k
            v_cache[cache_row, leftpad[k_seq] + logical] = flat_v

    lengths = (ends - leftpad + new_len).to(torch.int32)
    if length_max == 0:  # no sequence reads a key: one unread row each (an empty cache has no row 0 to gather)
        keys = k_cache.new_zeros((batch, 1, *k_cache.shape[2:]))
        values = v_cache.new_zeros((batch, 1, *v_cache.shape[2:]))
    elif paged:  # each sequence's pages in order, as a dense (batch, pages * page_size, ...) copy
        pages_needed = max(-(-length_max // page_size), 1)
        table = torch.where(used[:, :pages_needed], page_table[:, :pages_needed].long(), 0)  # unread: any page
        keys = k_cache[table].flatten(1, 2)
        values = v_cache[table].flatten(1, 2)
    elif rows is None and h["pad_max"] == 0:  # the cache itself: its slots, seqused_k = the lengths
        keys, values = k_cache, v_cache
    else:  # rows [leftpad, leftpad + length) of each sequence's cache row
        index = (leftpad[:, None] + torch.arange(max(length_max, 1), device=device)[None, :]).clamp_max(capacity - 1)
        cache_rows = (torch.arange(batch, device=device) if rows is None else rows.long())[:, None]
        keys, values = k_cache[cache_rows, index], v_cache[cache_rows, index]
    out, lse = flash_attn_varlen_func(
        q, keys.contiguous(), values.contiguous(), cu_seqlens_q, None, max_seqlen_q if packed_q else None,
        max(keys.shape[1], 1), None, lengths, softmax_scale, causal, window_size=window_size, softcap=softcap,
        sm_margin=sm_margin, return_lse=True, backend=backend)
    return (out, lse) if return_softmax_lse else out


def get_scheduler_metadata(
    batch_size,
    max_seqlen_q,
    max_seqlen_k,
    num_heads_q,
    num_heads_kv,
    headdim,
    cache_seqlens,
    qkv_dtype=torch.bfloat16,
    headdim_v=None,
    cu_seqlens_q=None,
    cu_seqlens_k_new=None,
    cache_leftpad=None,
    page_size=None,
    max_seqlen_k_new=0,
    causal=False,
    window_size=(-1, -1),
    attention_chunk=0,
    has_softcap=False,
    num_splits=0,
    pack_gqa=None,
    sm_margin=0,
):
    """FlashAttention-3's precomputed decoding schedule (split-KV counts, tile order) for flash_attn_with_kvcache's
    scheduler_metadata: a scheduling hint like num_splits, which changes results only by rounding there. fa3nn's
    kernels schedule themselves, so this returns None, which flash_attn_with_kvcache takes: code that builds the
    schedule once per batch and passes it along runs unchanged. FlashAttention-3's parameters in its order; the
    hints are checked as flash_attn_with_kvcache checks them, the shapes at the call that uses them."""
    check_hints(num_splits, pack_gqa, sm_margin)
    return None
