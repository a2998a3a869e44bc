"""FlashAttention-3's arguments beyond fa3nn's own, so that code written for `flash_attn_interface` runs unchanged.

FlashAttention-3 (hopper/flash_attn_interface.py) gives flash_attn_func and flash_attn_varlen_func these parameters,
in this order after (q, k, v[, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q, seqused_k]):

    softmax_scale, causal, qv, q_descale, k_descale, v_descale, window_size, attention_chunk, softcap,
    num_splits, pack_gqa, deterministic, sm_margin, return_attn_probs

fa3nn's functions take the same names in the same positions. What each does here:

- qv: DeepSeek MLA's extra query against V, scores = q·kᵀ + qv·vᵀ. That is one attention over the concatenations
  [q, qv] and [k, v] along headdim with V unchanged (`with_qv`), which fa3nn runs as such (a headdim_qk != headdim_v
  call of sizes the native kernels are not built for, which have 192 / 128 only: the Triton or reference backend; the
  copy of the concatenation is the price).
- q_descale, k_descale, v_descale: FP8 inputs (fa3nn.fp8.inputs).
- attention_chunk: Llama 4's chunked attention (a query sees only keys of its own chunk of attention_chunk key
  positions), run as finer packed sequences (fa3nn.chunks), forward and backward (FlashAttention-3: forward only).
- num_splits, pack_gqa: scheduling hints for FlashAttention-3's kernels (split-KV and packed GQA heads, both for
  decoding). fa3nn's kernels schedule themselves; the values are checked and change nothing (in FlashAttention-3
  they change the results only by rounding: split-KV sums in another order).
- sm_margin: SMs to leave free for kernels that overlap attention (communication). The hopper backend's attention
  kernels (forward, FP8 forward, the backward's main kernel) launch persistent with at most SMs - sm_margin CTAs, one
  per SM; the backward then takes its persistent schedule for every call (varlen and windows too, where one CTA per
  tile is otherwise faster). The short memory-bound passes around them are not bounded: the backward's preprocess /
  postprocess, the FP8 recipes' quantization (Triton). A margin that leaves no SM is an error. Triton and the
  reference do not bound their grids: a call with a positive value that runs there is warned about once per backend
  (the results are the same either way). FlashAttentionV3 and patch_hf take no sm_margin.
- return_attn_probs: return (out, lse) instead of out, as FlashAttention-3 does (fa3nn's `return_lse` is the same).

Scalars: FlashAttention-3's op takes its int and float arguments (window_size's sides, attention_chunk, softcap,
softmax_scale, num_splits, sm_margin, max_seqlen) through torch's schema, which converts numpy scalars and 0-d
tensors; fa3nn takes them too, numpy integers / floating scalars and 0-d CPU tensors, as the numbers they hold
(fa3nn.checks.as_int / as_real, one rule for every public function). Refused, naming the argument: bools (the schema
takes True as 1), a non-integer where an int is required (it truncates np.float32(2.5) to 2), GPU tensors
(reading one is a host sync per call), and tensors that require grad (a learnable scale or cap would get no gradient).

FlashAttention-3's flash_attn_qkvpacked_func (fa3nn.interface), flash_attn_combine (fa3nn.combine) and
flash_attn_with_kvcache (fa3nn.kvcache: an in-place cache update, paged caches, rotary, packed queries / new keys; no
qv or FP8 caches) exist too, and get_scheduler_metadata (fa3nn.kvcache), a scheduling hint as num_splits is: it returns
None, which flash_attn_with_kvcache takes.
"""

from __future__ import annotations

import warnings

import torch

from fa3nn.checks import WINDOW_MAX, as_int, check_bool, type_name

# The backends (and FP8 paths) a call with sm_margin > 0 ran on without honouring it, each warned about once.
_warned_sm_margin: set[str] = set()


def _as_int(name: str, value, minimum: int | None, what: str) -> int:
    """`value` as a Python int (fa3nn.checks.as_int: a numpy integer or 0-d integer CPU tensor is one, as in
    FlashAttention-3's op), at least `minimum`."""
    value = as_int(name, value, f"an int ({what})")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum} ({what}), got {value}")
    return value


def check_hints(num_splits, pack_gqa, sm_margin) -> tuple[int, bool | None, int]:
    """FlashAttention-3's scheduling hints: checked as it types them, returned as Python values; they change no
    result (module docstring)."""
    num_splits = _as_int("num_splits", num_splits, None, "FlashAttention-3's split-KV count, <= 0 for its heuristic")
    if pack_gqa is not None:
        check_bool("pack_gqa", pack_gqa)
    return num_splits, pack_gqa, _as_int("sm_margin", sm_margin, 0, "SMs to leave free")


def note_sm_margin(sm_margin: int, honoured: bool, backend: str) -> None:
    """Warn once per backend about calls with sm_margin > 0 that `backend` runs without leaving the SMs free (every
    backend but the native Hopper one: Backend.honours_sm_margin, FP8Path.sm_margin)."""
    if sm_margin > 0 and not honoured and backend not in _warned_sm_margin:
        _warned_sm_margin.add(backend)
        warnings.warn(f"fa3nn: sm_margin={sm_margin} is not honoured by the {backend} backend, whose kernels do not "
                      "bound their grids (the results are the same; kernels meant to overlap attention on the spare "
                      "SMs wait instead); the hopper backend honours it", stacklevel=2)


def check_attention_chunk(attention_chunk) -> int:
    """attention_chunk as a Python int in [0, WINDOW_MAX]."""
    attention_chunk = _as_int("attention_chunk", attention_chunk, 0, "chunked attention's chunk length, 0 for none")
    if attention_chunk > WINDOW_MAX:
        raise ValueError(f"attention_chunk must be at most {WINDOW_MAX} (int32), got {attention_chunk}")
    return attention_chunk


def wants_lse(return_attn_probs, return_lse) -> bool:
    """FlashAttention-3's return_attn_probs and fa3nn's return_lse both ask for (out, lse)."""
    check_bool("return_attn_probs", return_attn_probs)
    check_bool("return_lse", return_lse)
    return return_attn_probs or return_lse


def check_qv(qv, q: torch.Tensor, v: torch.Tensor) -> None:
    """qv is laid out as q is, with v's headdim."""
    if not isinstance(qv, torch.Tensor):
        raise TypeError(f"qv must be a torch.Tensor laid out as q with v's headdim, or None; got {type_name(qv)}")
    expected = (*q.shape[:-1], v.shape[-1])
    if tuple(qv.shape) != expected or qv.dtype != q.dtype or qv.device != q.device:
        raise ValueError(f"qv must have q's shape with v's headdim {expected}, q's dtype {q.dtype} and device "
                         f"{q.device}; got shape {tuple(qv.shape)}, dtype {qv.dtype}, device {qv.device}")


def with_qv(q, k, v, qv, softmax_scale):
    """(q', k', softmax_scale) with qv folded in: q' = [q, qv] and k' = [k, v] along headdim, so that
    q'·k'ᵀ = q·kᵀ + qv·vᵀ; the default scale is FlashAttention-3's, (headdim + headdim_v) ** -0.5, which is q''s
    default too. V is unchanged, and autograd carries v's gradient from both of its uses."""
    if qv is None:
        return q, k, softmax_scale
    check_qv(qv, q, v)
    return torch.cat([q, qv], dim=-1), torch.cat([k, v], dim=-1), softmax_scale
