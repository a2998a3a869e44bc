"""The native Hopper backward (kernels/hopper/flash_bwd*.cu), HopperBackend's backward.

Kernel scope: dense or packed (varlen, cu_seqlens) batches, MHA/GQA/MQA (nheads_kv dividing nheads), head dim 64,
128 or 256 (64-key blocks whose two consumer warpgroups split the head dim: kernels/hopper/flash_bwd_cols.cuh), and
multi-head latent attention's q / k 192 with v 128 (the same blocks, the head dims' panels dealt unevenly:
kernels/hopper/flash_bwd_mla.cuh; bulk dQ, no windows or softcap),
bf16/fp16, causal or not, sliding windows and softcap (dense or varlen); dQ is summed with fp32 atomics, so it is
not bitwise deterministic. Varlen, windows and softcap run each head dim's default variant (DEFAULT_VARIANTS; the
library builds no other for them). Under GQA/MQA one CTA per K/V head walks every query head of its group and sums
dK/dV in registers (kernels/hopper/flash_bwd.cuh, BwdQueryWalk): dK/dV stay deterministic and are written once per
K/V head.
`backward` runs GQA/MQA through that in-kernel path (NATIVE_GQA, the default), each group in parts where the whole
groups give too few tiles for the device's SMs (KV_PARTS, kv_parts: tiles of group / parts query heads, fp32 partial
dK/dV summed once, so dK/dV's summation order depends on the parts, which sm_margin does not change); with NATIVE_GQA
off it expands K and V to every query head (copies), runs the kernel as MHA and sums dK/dV over each group.
`lse` is the forward's: float32, natural log, (batch, nheads, seqlen_q), or (nheads, total_q) for varlen.

`backward` has the Backend.backward signature (fa3nn/backends/base.py); `launch` is the kernel call with the
conventions of fa3nn.backends.hopper.launch (allocations through torch, the current stream, no host sync, optional
preallocated outputs so tests can NaN-poison them). Arguments are checked before the library is loaded, so a wrong
call fails with a message that names the argument on any machine.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from fa3nn.backends.base import AttnCall, AttnParams, Varlen
from fa3nn.backends.hopper_lib import LIBRARY, max_ctas_leaving, tma_ready
from fa3nn.checks import check_softcap, check_window_size
from fa3nn.masks import Window
from fa3nn.sinks import sinks_gradient, sinks_gradient_of_delta

SUPPORTED_HEADDIMS = (64, 128, 256)
# (q / k head dim, v head dim) pairs the kernels take: equal ones, and multi-head latent attention's 192 / 128, which
# has no window or softcap kernels (PLAIN_ONLY_HEADDIMS); the forward (hopper.py) takes the same pairs.
HEADDIM_PAIRS = tuple((d, d) for d in SUPPORTED_HEADDIMS) + ((192, 128),)
PLAIN_ONLY_HEADDIMS = ((192, 128),)
QK_HEADDIMS = tuple(d for d, _ in HEADDIM_PAIRS)
SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
# Compile-time variants of the main kernel (fa3nn_hopper_bwd's `variant`). red_dq: each consumer thread adds its dQ
# fragment to dq_accum with red.global.add.v2.f32. bulk_dq: FA3's dQ path: the fragment goes to a 128B-swizzled fp32
# tile in shared memory and one producer thread adds the tile with TMA reduce-adds (kernels/hopper/flash_bwd.cuh;
# benchmarks/NOTES.md, "Bulk dQ"). overlap: the next query block's S^T (d64: and dP^T) GEMMs issued before this
# block's dQ GEMM, which is collected one step later (kernels/hopper/flash_bwd_overlap.cuh; NOTES, "Overlap");
# bulk_dq_overlap: both. m128: bulk_dq with 128-row query blocks (FA3's d64 tile; dQ split by query rows), head dim 64
# only. Head dim 256 has red_dq and bulk_dq (kernels/hopper/flash_bwd_cols.cuh: 225 of 227 KB of shared memory go to
# K, V, the Q / dO ring and P^T / dS^T, so its bulk dQ stages in the ring stage it has just read, BwdConfig::
# kDQInRing; no overlap: its S^T / dP^T GEMMs issued ahead would need 32 more of the 240 registers).
# mla_keys: multi-head latent attention (192 / 128) with 128-key blocks in the d128 kernel's key split
# (kernels/hopper/flash_bwd_mla_keys.cuh: Q / dO loads and dQ reduce-adds once per 128 keys, as cuDNN's; the
# default there, dense and varlen).
VARIANTS = {"red_dq": 0, "bulk_dq": 1, "overlap": 2, "bulk_dq_overlap": 3, "m128": 4, "mla_keys": 5}
# Variants built for some head dims (q's) only; bulk_dq is built for all.
VARIANT_HEADDIMS = {"red_dq": SUPPORTED_HEADDIMS, "overlap": (64, 128), "bulk_dq_overlap": (64, 128), "m128": (64,),
                    "mla_keys": (192,)}
# Added to a variant's number: the preprocess / postprocess kernels with 2-byte accesses (flash_bwd_launch.cuh
# kScalarPrePostBit). By default the preprocess moves 16 bytes per access wherever out and dout, the postprocess
# wherever dq, are 16-B aligned with strides that are multiples of 8 elements; each falls back to 2-byte accesses
# elsewhere (a caller's dq, say).
SCALAR_PREPOST_BIT = 16
# Added to a variant's number: dK / dV stored 4 bytes at a time where 16-byte stores could run (flash_bwd_launch.cuh
# kScalarDKDVBit; benchmarks and tests). By default the 16-byte stores run wherever dk and dv are 16-B aligned with
# strides that are multiples of 8 elements.
SCALAR_DKDV_BIT = 32
# The main kernel's CTAs (fa3nn_hopper_bwd's `ctas`): "per_tile" one CTA per (key block, K/V head, batch) tile;
# "persistent" one CTA per SM (or `max_ctas`), each walking tiles (round k of gridDim.x tiles, dealt boustrophedon when
# causal) with its next tile's K/V loaded under its current tile's dQ hand-off and dK / dV stores; "auto" the library's
# choice (flash_bwd_launch.cuh use_persistent_bwd: persistent for dense tiles of at most 1024 query rows non-causal,
# 4096 causal, at head dim 128 for causal tiles of 2048-8192 rows only, but one CTA per tile for causal MHA over more
# than 16 (head, batch) pairs where the static deal is modelled to balance worse (static_deal_gives_way,
# bwd_deal_model.cuh); varlen as dense where every sequence has one query length and one key length
# (uniform_lengths), else one CTA per tile, as windows, 192 / 128 and 256), or persistent on SMs - sm_margin CTAs for
# a call with a margin (backward). Benchmarks and tests pick the others.
SCHEDULES = ("auto", "per_tile", "persistent")
# fa3nn_hopper_bwd's `ctas` for auto on a varlen call of uniform_lengths (flash_bwd_launch.cuh kCtasAutoUniform).
CTAS_AUTO_UNIFORM = -2


@functools.lru_cache(maxsize=64)  # every layer of a step passes the same boundaries
def _one_length(starts: tuple[int, ...]) -> bool:
    if len(starts) < 2 or starts[1] <= starts[0]:
        return False
    first = starts[1] - starts[0]
    return all(b - a == first for a, b in zip(starts, starts[1:]))


def uniform_lengths(varlen: Varlen) -> bool:
    """Whether every sequence of a varlen call has one query length and one key length, both positive: its tiles
    are then the dense call's (none empty), and auto takes the dense rule (H100 s45l, all 2048: persistent 1.04-1.07x
    one CTA per tile, where it runs 0.70-0.95x on mixed lengths)."""
    return _one_length(tuple(varlen.seqstarts_q)) and _one_length(tuple(varlen.seqstarts_k))


def _partial_buffer(like: torch.Tensor, kv_parts: int) -> torch.Tensor:
    """An fp32 buffer for the kernel's partial dK or dV of `like` (k or v) in kv_parts parts: heads h * kv_parts +
    part. Not zeroed: every row a tile owns is written (launch zeroes the rest, as for dk / dv; s49's form zeroed all
    of it, one more pass over parts x the K/V size). Tests replace it with a NaN-filled one."""
    return torch.empty(*like.shape[:-2], like.shape[-2] * kv_parts, like.shape[-1], dtype=torch.float32,
                       device=like.device)


def sum_head_groups(x: torch.Tensor, nheads_kv: int) -> torch.Tensor:
    """x's heads (axis -2) summed in consecutive groups down to nheads_kv heads, in fp32: the parts' partial dK / dV
    (head h * kv_parts + part) and, with NATIVE_GQA off, the expanded query heads' (head h * group + i)."""
    return x.unflatten(-2, (nheads_kv, x.shape[-2] // nheads_kv)).sum(-2, dtype=torch.float32)


def launch_ctas(schedule: str, max_ctas: int | None, varlen: Varlen | None, device) -> int:
    """fa3nn_hopper_bwd's `ctas` for a launch with `schedule` (SCHEDULES)."""
    if schedule == "persistent":
        return max_ctas or torch.cuda.get_device_properties(device).multi_processor_count
    if schedule == "per_tile":
        return -1
    return CTAS_AUTO_UNIFORM if varlen is not None and uniform_lengths(varlen) else 0


def default_variant(headdim: int | None) -> str:
    """The variant a call without one runs, dense or varlen: DEFAULT_VARIANTS' (red_dq for a head dim without one,
    which check_arguments then refuses)."""
    return DEFAULT_VARIANTS.get(headdim, "red_dq")


def varlen_variants(headdim: int) -> tuple[str, ...]:
    """The backward variants built for varlen at `headdim`: the default, and at 192 / 128 both of its variants
    (kernels/hopper/flash_bwd_d192.cu)."""
    return tuple(variants_for(headdim)) if headdim == 192 else (default_variant(headdim),)


def variants_for(headdim: int) -> list[str]:
    """The backward variants built for `headdim`."""
    return [name for name in VARIANTS if headdim in VARIANT_HEADDIMS.get(name, QK_HEADDIMS)]
# What dispatch runs, per head dim. H200, 2026-11-30 16:37 UTC (NOTES "2026-11-30 evening"), bwd TFLOP/s at seqlen
# 2048/16384, non-causal and causal, vs red_dq: d128 bulk_dq_overlap 1.17-1.22x (0.80-0.90x cuDNN), bulk_dq
# 1.11-1.18x, overlap 0.99-1.06x; d64 bulk_dq 1.10-1.27x, bulk_dq_overlap 1.10-1.26x (within 2% of bulk_dq, each
# ahead at two shapes), overlap 0.88-0.97x: at d64 the simpler build.
# d64 since 2026-11-30 23:30 UTC (benchmarks/results/bwd-m128-h200-20261130-2325/): m128 1.14-1.37x bulk_dq at seqlen
# 512-16384, causal and not, 0.93-1.07x cuDNN (bulk_dq 0.71-0.86x).
# d128 after explicit LDS/STS in every backward kernel (results/visibility-h200-20261130-2345/): bulk_dq_overlap
# 0.91-0.99x cuDNN at 2048/16384, 1.09-1.12x the previous build in the same run.
# d256 (2026-12-04, results/s30c-h200-20261204-1708/): bulk_dq (staged in the ring) 1.12-1.32x red_dq at 512-8192,
# 0.97-1.14x cuDNN, 1.31-1.55x FA2 (red_dq: 0.76-0.96x cuDNN, s30a).
# d128 since 2026-12-06 (NOTES "forty-first session", results/s41a-h100-20261206-0004/, s41c-...-0003/): bulk_dq
# in FlashAttention-3's order (dQ staged under the dK GEMM, kernels/hopper/flash_bwd.cuh bwd_consumer), 1.000-1.034x
# bulk_dq_overlap at 512-16384, causal and not (H100); 1.00-1.06x cuDNN in one bench.py run (s41d-h100-20261206-0005).
# 192 / 128 since 2026-12-06: mla_keys (128-key blocks), dense 1.10-1.27x bulk_dq at 512-8k, causal 1.10 / 1.14 /
# 1.17, non-causal 1.24 / 1.27 / 1.23 (H100, same process, results/s43d-h100-20261206-0527/); varlen since the
# forty-fourth session (its tiles published by the producer, BwdConfig::kPublishTiles): x bulk_dq on the same packed
# calls 1.18-1.26x non-causal, 1.10-1.12x causal, uniform 512 / 2048 and mixed lengths (H100, results/s44e-h100-
# 20261206-0738/).
DEFAULT_VARIANTS = {64: "m128", 128: "bulk_dq", 256: "bulk_dq", 192: "mla_keys"}
# GQA/MQA in `backward`: True = the kernel walks each K/V head's query heads (no K/V copies, no group sum); False = the
# expansion path (repeat_interleave K/V, MHA kernel, fp32 group sum), which costs group x K/V memory, two copies and a
# sum. H200, 2026-11-30 17:25 UTC (scripts/hopper_bwd_gqa_check.py, 16 query heads on 4 or 2 K/V heads, bf16):
# in-kernel 1.04-1.34x the expansion path at d64/d128 x 2048/8192 x causal or not, 0.75-0.98x cuDNN; the GQA tests
# of tests/test_hopper_bwd.py pass.
NATIVE_GQA = True
# CTA order of the main kernel's grid (fa3nn_hopper_bwd's `grid_order`): key_blocks_inner = (key blocks, K/V heads,
# batch), the MHA order; key_blocks_outer = (K/V heads, batch, key blocks): key block 0, the longest CTA under a causal
# mask (group times longer under GQA), of every (K/V head, batch) starts first. key_blocks_outer_per_batch =
# (K/V heads, key blocks, batch): outermost within each batch, so the CTAs in flight read one batch's Q / dO (L2)
# while its long causal tiles still start first. auto: per batch for dense causal GQA/MQA run one CTA per tile,
# outer for it run persistent and for dense causal MHA over at most 16 (head, batch) pairs (48 at head dim 64) that
# auto runs persistent or, with at most 96 key blocks each, over at most 16 one CTA per tile, else inner
# (kernels/hopper/flash_bwd_launch.cuh auto_key_blocks_outer and tile_order give the measurements).
GRID_ORDERS = {"auto": 0, "key_blocks_inner": 1, "key_blocks_outer": 2, "key_blocks_outer_per_batch": 3}
# GQA/MQA in parts (backward, kv_parts; launch's kv_parts): "auto", or a divisor of the group (benchmarks and
# tests). One CTA per (key block, K/V head, batch) tile walks the whole group, so few K/V heads and a short batch
# leave SMs idle: Llama-3-70B's 64 / 8 heads under 8-way tensor parallelism are 8 / 1 per GPU, 64 tiles at one 8k
# sequence, and a list-scheduling model of 132 SMs (scripts/model_bwd_gqa_parts.py) gives 0.48 of the SMs' time
# busy non-causal, 0.25 causal (key block 0's tile walks all 8 heads' 64 query blocks while the average SM has 126
# steps). In parts each tile walks group / parts of the heads and writes an fp32 partial dK / dV, summed once.
# s49a (H200, the same split done with K/V copies and bf16 partials, scripts/gqa_bwd_shapes.py, x whole groups):
# 70B-TP8 one 8k sequence 1.82x non-causal (0.56 -> 1.02x cuDNN), 2.00x causal (0.36 -> 0.72x), MQA 16 / 1 at 2 x 8k
# causal 1.77x, d256 MQA causal 1.86x; 0.82-0.98x where 128 non-causal tiles were split (the rule no longer splits
# them); its bf16 partials broke the error-ratio rule once (d256 varlen dv, 2 parts), which the fp32 ones avoid.
# This kernel form (H200 s50c, x whole groups, x cuDNN): 70B-TP8 8k 1.84x / 1.03x non-causal, 3.23x / 1.18x causal;
# Qwen2.5-7B under 4-way TP (7 / 1, 7 parts) causal 3.05x / 1.15x; MQA 16 / 1 2 x 8k causal 1.77x / 1.09x; H100 s50a
# likewise (1.86x / 3.18x at 70B-TP8 8k).
KV_PARTS = "auto"
# Keys per tile of each head dim's default kernels (kernels/hopper/flash_bwd.cuh BwdConfig::kBlockN; 192 / 128's
# mla_keys has 128), for kv_parts' tile count.
KEY_BLOCK_ROWS = {64: 128, 128: 128, 256: 64, 192: 128}


def check_arguments(dout, q, k, v, out, lse, softmax_scale: float, varlen: Varlen | None = None) -> None:
    """Raise ValueError naming the first argument the native backward cannot take, and what to do instead. Dense:
    q (batch, seqlen_q, nheads, d), out, dout (batch, seqlen_q, nheads, dv), k (batch, seqlen_k, nheads_kv, d), v
    (batch, seqlen_k, nheads_kv, dv), (d, dv) in HEADDIM_PAIRS, lse (batch, nheads, seqlen_q); varlen: the same without
    the batch axis (rows packed, `varlen` says where each sequence starts), lse (nheads, total_q)."""
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout), ("lse", lse)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    dims = 4 if varlen is None else 3
    layout = "(batch, seqlen, nheads, headdim)" if varlen is None else "(total_rows, nheads, headdim) with cu_seqlens"
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)):
        if t.dim() != dims:
            raise ValueError(f"{name} must be {dims}-d {layout}, got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"{name} has dtype {t.dtype}; the native backward takes bfloat16 or float16")
        if t.dtype != q.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but q has {q.dtype}; pass one dtype for q, k, v, out, dout")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}; put all tensors on one device")
    nheads, headdim = q.shape[-2:]
    headdim_v = v.shape[-1]
    if (headdim, headdim_v) not in HEADDIM_PAIRS:
        raise ValueError(
            f"q has head dim {headdim} and v {headdim_v}; the native backward supports "
            f"{', '.join(f'{d}/{dv}' for d, dv in HEADDIM_PAIRS)} (q/k / v; use backend='triton' for the backward)"
        )
    if (varlen is None and k.shape[0] != q.shape[0]) or k.shape[-1] != headdim:
        if varlen is None:
            expected = f"(batch={q.shape[0]}, seqlen_k, nheads, {headdim})"
        else:
            expected = f"(total_k, nheads, {headdim})"
        raise ValueError(f"k has shape {tuple(k.shape)}; expected {expected}")
    if k.shape[-2] == 0 or nheads % k.shape[-2] != 0:
        raise ValueError(
            f"k has {k.shape[-2]} heads but q has {nheads}: q's heads must be a whole multiple of k's (GQA/MQA: "
            "nheads = group * nheads_kv, query head h reads K/V head h // group)"
        )
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(f"v has shape {tuple(v.shape)}; expected {(*k.shape[:-1], headdim_v)} (k's shape with v's "
                         "head dim)")
    o_shape = (*q.shape[:-1], headdim_v)
    if out.shape != o_shape:
        raise ValueError(f"out has shape {tuple(out.shape)}; expected q's shape with v's head dim {o_shape}")
    if dout.shape != o_shape:
        raise ValueError(f"dout has shape {tuple(dout.shape)}; expected out's shape {o_shape}")
    lse_shape = (q.shape[0], nheads, q.shape[1]) if varlen is None else (nheads, q.shape[0])
    if lse.shape != lse_shape or lse.dtype != torch.float32:
        raise ValueError(
            f"lse has shape {tuple(lse.shape)} and dtype {lse.dtype}; expected the forward's float32 "
            f"{'(batch, nheads, seqlen_q)' if varlen is None else '(nheads, total_q)'} = {lse_shape}"
        )
    if lse.device != q.device:
        raise ValueError(f"lse is on {lse.device} but q is on {q.device}; put all tensors on one device")
    if varlen is not None:
        check_varlen(varlen, q.shape[0], k.shape[0], q.device)
    if not softmax_scale > 0:
        raise ValueError(f"softmax_scale must be positive, got {softmax_scale}")


def check_varlen(varlen: Varlen, total_q: int, total_k: int, device: torch.device) -> None:
    """The packed-batch metadata against the tensors: what the kernels index by (they read cu_seqlens on the GPU)."""
    for name, cu, starts, total, longest in (
        ("cu_seqlens_q", varlen.cu_seqlens_q, varlen.seqstarts_q, total_q, varlen.max_seqlen_q),
        ("cu_seqlens_k", varlen.cu_seqlens_k, varlen.seqstarts_k, total_k, varlen.max_seqlen_k),
    ):
        if cu.device != device or cu.dim() != 1 or cu.numel() != varlen.batch + 1:
            raise ValueError(f"{name} must be a 1-d tensor of batch + 1 = {varlen.batch + 1} offsets on {device}, "
                             f"got shape {tuple(cu.shape)} on {cu.device}")
        if len(starts) != varlen.batch + 1 or starts[0] != 0 or starts[-1] != total:
            raise ValueError(f"{name} must run from 0 to the packed rows ({total}), got {starts[0]}..{starts[-1]}")
        lengths = [b - a for a, b in zip(starts, starts[1:])]
        if min(lengths, default=0) < 0 or max(lengths, default=0) > longest:
            raise ValueError(f"{name} must be non-decreasing with no sequence longer than its max_seqlen ({longest})")
    if varlen.batch != len(varlen.seqstarts_k) - 1:
        raise ValueError("cu_seqlens_q and cu_seqlens_k must describe the same number of sequences")


def launch(dout, q, k, v, out, lse, softmax_scale: float, causal: bool, dq=None, dk=None, dv=None, dlse=None,
           variant: str | None = None, library: ctypes.CDLL | None = None, grid_order: str = "auto",
           scalar_prepost: bool = False, schedule: str = "auto", max_ctas: int | None = None,
           scalar_dkdv: bool = False, varlen: Varlen | None = None, window_size: tuple[int, int] = (-1, -1),
           softcap: float = 0.0, sinks: torch.Tensor | None = None, kv_parts: int = 1):
    """Run preprocess, main kernel and postprocess; returns (dq, dk, dv). Allocates outputs and fp32 workspaces
    through torch unless dq/dk/dv are given, launches on the current stream, never syncs. `dlse` (the gradient into
    lse, lse's shape; None for none) is folded into the preprocess's delta. `variant` picks a build of the main
    kernel (VARIANTS; None: DEFAULT_VARIANTS for the head dim); `library` (a hopper_build.load() result) another
    build of the library; `grid_order` the CTA order (GRID_ORDERS; benchmarks and tests); `scalar_prepost` the
    preprocess / postprocess kernels with 2-byte accesses where the 16-byte ones would run (SCALAR_PREPOST_BIT;
    benchmarks and tests); `schedule` the main kernel's CTAs (SCHEDULES; `max_ctas` caps a persistent launch's,
    default the SM count; benchmarks and tests); `scalar_dkdv` dK / dV stored 4 bytes at a time (SCALAR_DKDV_BIT;
    benchmarks and tests). k/v may have fewer heads than q (GQA/MQA, a divisor of q's): dk/dv come out with k/v's
    shape. `varlen` (base.Varlen): packed sequences, tensors without the batch axis (check_arguments), the default
    variant only. `window_size` (left, right), -1 unbounded, with `causal` as in fa3nn.masks.Window.from_args: a
    window other than full or causal runs the window kernels (dense or varlen, the default variant). `softcap` > 0:
    the gradient of softmax(softcap * tanh(scores * softmax_scale / softcap)) (the softcap kernels, the default variant;
    `lse` must come from a forward with the same cap). `sinks` (nheads,): the forward's attention sinks (fa3nn.sinks;
    out and lse are then those with the sinks): returns (dq, dk, dv, dsinks), the sinks' gradient from the
    preprocess's delta and lse_log2 (fa3nn.sinks.sinks_gradient_of_delta), no further pass over dout and out.
    `kv_parts` > 1 (GQA/MQA; a divisor of the group): each K/V head's query heads walked by that many
    tiles per key block, their fp32 partial dK / dV summed here into dk / dv (kv_parts says when; backward)."""
    if variant is None:  # a head dim without a default: check_arguments names the problem
        variant = default_variant(q.shape[-1] if isinstance(q, torch.Tensor) else None)
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not a backward variant; choose one of {', '.join(VARIANTS)}")
    if grid_order not in GRID_ORDERS:
        raise ValueError(f"grid_order {grid_order!r} is not a grid order; choose one of {', '.join(GRID_ORDERS)}")
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} is not a backward schedule; choose one of {', '.join(SCHEDULES)}")
    if max_ctas is not None and (schedule != "persistent" or isinstance(max_ctas, bool)
                                 or not isinstance(max_ctas, int) or max_ctas < 1):
        raise ValueError(f"max_ctas must be a positive int and needs schedule='persistent', got max_ctas={max_ctas!r} "
                         f"with schedule={schedule!r}")
    check_arguments(dout, q, k, v, out, lse, softmax_scale, varlen)
    window = window_of(causal, window_size)
    check_softcap(softcap, softmax_scale)
    check_plain_only(q.shape[-1], v.shape[-1], window, window_size, softcap, "backward")
    if window.sliding and variant != DEFAULT_VARIANTS[q.shape[-1]]:
        raise ValueError(f"window_size {window_size}: the native backward has sliding windows in the default variant "
                         f"({DEFAULT_VARIANTS[q.shape[-1]]!r}) only; use backend='triton' otherwise")
    if softcap > 0 and variant != DEFAULT_VARIANTS[q.shape[-1]]:
        raise ValueError(f"softcap {softcap}: the native backward has softcap in the default variant "
                         f"({DEFAULT_VARIANTS[q.shape[-1]]!r}) only; use backend='triton' otherwise")
    if varlen is not None and variant not in varlen_variants(q.shape[-1]):
        raise ValueError(f"variant {variant!r}: the varlen backward of head dim {q.shape[-1]} is built as "
                         f"{', '.join(map(repr, varlen_variants(q.shape[-1])))} only")
    if variant not in variants_for(q.shape[-1]):
        raise ValueError(f"variant {variant!r} is built for head dim {VARIANT_HEADDIMS[variant]} only, q has head dim "
                         f"{q.shape[-1]}; choose one of {', '.join(variants_for(q.shape[-1]))}")
    if dlse is not None and (dlse.shape != lse.shape or dlse.device != lse.device):
        raise ValueError(f"dlse has shape {tuple(dlse.shape)} on {dlse.device}; expected lse's {tuple(lse.shape)} "
                         f"on {lse.device}")
    for name, grad, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        # The kernels store 2 elements (4 B) at a time: contiguous head dim, even strides, 4-B aligned base.
        if grad is not None and (grad.shape != like.shape or grad.dtype != like.dtype or grad.stride(-1) != 1
                                 or any(s % 2 for s in grad.stride()[:-1]) or grad.data_ptr() % 4):
            raise ValueError(f"{name} must have shape {tuple(like.shape)}, dtype {like.dtype}, a contiguous head dim "
                             "and even strides (or pass None and let the backward allocate it)")
    group = q.shape[-2] // k.shape[-2]
    if isinstance(kv_parts, bool) or not isinstance(kv_parts, int) or kv_parts < 1 or group % kv_parts:
        raise ValueError(f"kv_parts must be a positive divisor of the GQA group ({group} query heads per K/V head), "
                         f"got {kv_parts!r}")
    if q.device.type != "cuda":
        raise ValueError(f"q is on {q.device}; the native backward needs a CUDA (Hopper) device")
    lib = library if library is not None else LIBRARY.require()
    dout, q, k, v, out = (tma_ready(t) for t in (dout, q, k, v, out))
    lse = lse.contiguous()
    dlse = None if dlse is None else dlse.to(torch.float32).contiguous()
    nheads, headdim = q.shape[-2:]
    if varlen is None:
        batch, seqlen_q = q.shape[:2]
        seqlen_k = k.shape[1]
        max_seqlen_q, max_seqlen_k = seqlen_q, seqlen_k
    else:  # seqlen_q / seqlen_k: the packed rows
        batch, seqlen_q, seqlen_k = varlen.batch, q.shape[0], k.shape[0]
        max_seqlen_q, max_seqlen_k = varlen.max_seqlen_q, varlen.max_seqlen_k
    dq = torch.empty_like(q) if dq is None else dq
    dk = torch.empty_like(k) if dk is None else dk
    dv = torch.empty_like(v) if dv is None else dv
    # GQA in parts: the kernel writes each part's fp32 partial sum at head h * kv_parts + part into buffers that stand
    # in for dk / dv here (zeroed below where dk / dv would be: rows no tile writes), summed into dk / dv after it.
    dk_out, dv_out = dk, dv
    if kv_parts > 1:
        dk, dv = (_partial_buffer(t, kv_parts) for t in (k, v))
    if seqlen_k == 0:  # no keys: nothing reaches q; the kernels launch nothing for an empty call
        dq.zero_()
    if seqlen_q == 0 or window.sliding:  # (a window's key blocks no query reaches are not written)
        dk.zero_()
        dv.zero_()
    if varlen is not None:  # the kernel skips the tiles of sequences without queries: their keys get no gradient
        for b in range(batch):
            if varlen.seqstarts_q[b + 1] == varlen.seqstarts_q[b]:
                dk[varlen.seqstarts_k[b]:varlen.seqstarts_k[b + 1]].zero_()
                dv[varlen.seqstarts_k[b]:varlen.seqstarts_k[b + 1]].zero_()
    rows = lib.fa3nn_hopper_bwd_block_m()  # the library's padding unit (its largest query block)
    ws_batch, ws_rows = workspace_shape(batch, seqlen_q, rows, varlen is not None)
    workspace = dict(dtype=torch.float32, device=q.device)
    dq_accum = torch.empty(ws_batch, nheads, ws_rows, headdim, **workspace)  # zeroed by the preprocess kernel
    lse_log2 = torch.empty(ws_batch, nheads, ws_rows, **workspace)
    delta = torch.empty(ws_batch, nheads, ws_rows, **workspace)
    if sinks is not None and varlen is not None:  # every row counts in the sinks' sum: the gaps between the
        lse_log2.fill_(float("inf"))              # sequences' rows, which no kernel writes, count 0
        delta.zero_()
    if varlen is None:
        strides = [s for t in (q, k, v, out, dout, dq, dk, dv) for s in t.stride()[:3]]
        cu_q = cu_k = None
    else:
        strides = [s for t in (q, k, v, out, dout, dq, dk, dv) for s in (0, *t.stride()[:2])]
        cu_q = varlen.cu_seqlens_q.to(torch.int32).contiguous()
        cu_k = varlen.cu_seqlens_k.to(torch.int32).contiguous()
    stride_array = (ctypes.c_int64 * 24)(*strides)
    ctas = launch_ctas(schedule, max_ctas, varlen, q.device)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        status = lib.fa3nn_hopper_bwd(
            dout.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
            None if dlse is None else dlse.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
            dq_accum.data_ptr(), lse_log2.data_ptr(), delta.data_ptr(),
            None if cu_q is None else cu_q.data_ptr(), None if cu_k is None else cu_k.data_ptr(),
            batch, seqlen_q, seqlen_k, max_seqlen_q, max_seqlen_k, nheads, k.shape[-2], headdim, v.shape[-1],
            stride_array,
            float(softmax_scale), int(causal), *window.kernel_sides(seqlen_q, seqlen_k), float(softcap),
            int(q.dtype == torch.bfloat16), VARIANTS[variant] | (SCALAR_PREPOST_BIT if scalar_prepost else 0)
            | (SCALAR_DKDV_BIT if scalar_dkdv else 0),
            GRID_ORDERS[grid_order], ctas, kv_parts, stream,
        )
    if status != 0:
        raise RuntimeError(f"fa3nn hopper backward failed: {lib.fa3nn_hopper_last_error().decode()}")
    if kv_parts > 1:
        for total, parts in ((dk_out, dk), (dv_out, dv)):
            total.copy_(sum_head_groups(parts, total.shape[-2]))  # one rounding, from fp32
        dk, dv = dk_out, dv_out
    if sinks is None:
        return dq, dk, dv
    if seqlen_k == 0 or seqlen_q == 0:  # the kernels launched nothing: no workspace row holds its statistics
        return dq, dk, dv, sinks_gradient(dout, out, lse, dlse, sinks)
    return dq, dk, dv, sinks_gradient_of_delta(sinks, lse_log2, delta, log2=True)


def check_plain_only(headdim: int, headdim_v: int, window: Window, window_size, softcap: float, direction: str
                     ) -> None:
    """Raise ValueError naming window_size / softcap where the head dims' kernels have neither (PLAIN_ONLY_HEADDIMS)."""
    if (headdim, headdim_v) not in PLAIN_ONLY_HEADDIMS:
        return
    for name, value, used in (("window_size", tuple(window_size), window.sliding), ("softcap", softcap, softcap > 0)):
        if used:
            raise ValueError(f"{name}={value} at head dims {headdim} / {headdim_v}: the native {direction} has no "
                             f"sliding-window or softcap kernels there; use backend='triton'")


def window_of(causal: bool, window_size) -> Window:
    """The normalized window of a call (fa3nn.masks.Window.from_args), its sizes checked (checks.check_window_size)."""
    check_window_size(window_size)
    return Window.from_args(causal, tuple(window_size))


def varlen_ws_row0(q_row0: int, batch: int, rows: int) -> int:
    """Sequence `batch`'s first workspace row under varlen (kernels/hopper/flash_bwd_seq.cuh, varlen_ws_row0), for a
    sequence starting at packed row q_row0; batch = the sequence count and q_row0 = the packed rows give the end."""
    return (q_row0 + batch * rows) // rows * rows


def workspace_shape(batch: int, seqlen_q: int, rows: int, varlen: bool) -> tuple[int, int]:
    """(batch, rows per head) of the fp32 workspaces, as kernels/hopper/flash_bwd_seq.cuh lays them out: dense,
    seqlen_q rounded up to `rows`; varlen (seqlen_q the packed rows), one batch with every sequence at its own padded
    offset, (seqlen_q + rows * batch) rounded down to `rows`."""
    if varlen:
        return 1, varlen_ws_row0(seqlen_q, batch, rows)
    return batch, (seqlen_q + rows - 1) // rows * rows


def plain_only_refusal(call: AttnCall, direction: str) -> str:
    """The refusal of a window or softcap at PLAIN_ONLY_HEADDIMS, naming what the call asked for."""
    asked = [f"window ({call.window.left}, {call.window.right})"] if call.window.sliding else []
    asked += [f"softcap={call.softcap}"] if call.softcap > 0 else []
    return (f"headdim {call.headdim}/{call.headdim_v} with {' and '.join(asked)}: the native {direction} has no "
            "sliding-window or softcap kernels there")


def refusal(call: AttnCall) -> str | None:
    """What the native backward lacks beyond the forward's refusals (HopperBackend.refusal checks those first)."""
    dims = (call.headdim, call.headdim_v)
    if dims not in HEADDIM_PAIRS:
        return (f"headdim {call.headdim}/{call.headdim_v}: the native backward has "
                f"{', '.join(f'{d}/{dv}' for d, dv in HEADDIM_PAIRS)} (q/k / v)")
    if dims in PLAIN_ONLY_HEADDIMS and (call.window.sliding or call.softcap > 0):
        return plain_only_refusal(call, "backward")
    if call.deterministic:
        return "deterministic=True: the native backward sums dQ with fp32 atomics; triton's backward has none"
    return None


# kv_parts' tolerance (non-causal): a divisor's wave fill within this share of the best counts as the best, so equal
# fills keep the fewer parts (64 tiles: 2, 4 or 8 parts all fill 0.97 of their waves on 132 SMs; 2 is taken).
# Relative: as an absolute 0.05 every divisor came within it where the best fill is below 0.05 (a few tiles in one
# partial wave, where the fill is proportional to the tiles), and 4 tiles of a group of 2 stayed whole.
FILL_SLACK = 0.05
# kv_parts (non-causal): split only where the best divisor's predicted fill is at least this many times the whole
# groups'. Splitting costs (fp32 partial stores, their sum): 0.82-0.98x where it added no fill (s49a), and the parts
# of a causal 2k call ran 0.74x the same tiles as MHA (s50c); the measured wins had 2x or more (64 tiles: 0.48 ->
# 0.97, 1.84x measured) and 1.75x (7 / 1 heads at 8k, predicted). Without it a CPU sweep (group 1-16, K/V heads
# 1-8, 1-200 key blocks, 132 SMs) split 3,129 shapes whose whole groups already filled 0.9 of their waves.
MIN_SPLIT_GAIN = 1.25


def _wave_fill(tiles: int, sms: int) -> float:
    """The share of `sms` x waves that `tiles` equal tiles keep busy (one tile per SM at a time)."""
    return tiles / (sms * -(-tiles // sms)) if tiles and sms > 0 else 0.0


def kv_parts(group: int, nheads_kv: int, key_blocks: int, causal: bool, sms: int) -> int:
    """Parts each K/V head's group of query heads is walked in (KV_PARTS "auto"), a divisor of `group` (Qwen2.5's
    groups of 7 and 5 included); tiles = key_blocks (summed over the batch) x nheads_kv x parts. Causal: the fewest
    parts whose tiles reach twice `sms` (key block 0 walks every query block, so its tile is the makespan unless the
    average SM's share is at least as long; the list-scheduling model's edge), else the whole group. Non-causal (equal
    tiles): the fewest parts whose waves of `sms` are filled best (_wave_fill), within a share FILL_SLACK of the best:
    splitting costs fp32 partials and their sum, and measured 0.82-0.98x where it gave no fill (s49a: 128 tiles into
    256, 0.97 either way), while 64 tiles in 2 parts (0.48 -> 0.97) measured 1.84x (s50c, 70B-TP8 8k) and 7 / 1 heads
    at one 8k sequence, 64 tiles whole (0.48) against 448 in 7 parts (0.85), ran 0.60x the same 448 tiles as MHA;
    whole groups unless that fill is MIN_SPLIT_GAIN times theirs. 1 wherever the whole groups give enough tiles (or
    fill their waves well enough): every MHA call, and GQA at the usual batch sizes."""
    tiles = key_blocks * nheads_kv
    divisors = [d for d in range(1, group + 1) if group % d == 0]
    if causal:
        return next((d for d in divisors if tiles * d >= 2 * sms), group)
    best = max(_wave_fill(tiles * d, sms) for d in divisors)
    if best < MIN_SPLIT_GAIN * _wave_fill(tiles, sms):
        return 1
    return next(d for d in divisors if _wave_fill(tiles * d, sms) >= best * (1 - FILL_SLACK))


def _sm_count(device: torch.device) -> int:
    """The SMs of `device`, kv_parts' unit (0 off CUDA, where `launch` refuses the call; tests stand in for it)."""
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 0


def _key_blocks(k: torch.Tensor, varlen: Varlen | None) -> int:
    """Key blocks of a call over its batch (varlen: each sequence's own), in the default kernels' blocks of keys
    (KEY_BLOCK_ROWS)."""
    rows = KEY_BLOCK_ROWS.get(k.shape[-1], 128)
    if varlen is None:
        return k.shape[0] * -(-k.shape[1] // rows)
    starts = varlen.seqstarts_k
    return sum(-(-(b - a) // rows) for a, b in zip(starts, starts[1:]))


def backward(dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None, sinks=None):
    """Backend.backward for the native kernels. GQA/MQA: the kernel walks each K/V head's group of query heads
    (NATIVE_GQA), in KV_PARTS parts (kv_parts for "auto"; launch's kv_parts: fp32 partial dK / dV, summed once) where
    the whole groups give too few tiles; with NATIVE_GQA off K and V are expanded to every query head (copies), the
    kernel runs as MHA and dK / dV are summed over each group. With `sinks`: (dq, dk, dv, dsinks) (launch).
    params.sm_margin > 0 runs the main kernel persistent on the SMs it leaves (hopper_lib.max_ctas_leaving), whatever
    auto would pick (varlen and windows included); the preprocess and postprocess kernels (one CTA per block of rows,
    memory-bound) are not bounded."""
    schedule = {}
    if params.sm_margin:
        schedule = dict(schedule="persistent", max_ctas=max_ctas_leaving(params.sm_margin, q.device))
    group = q.shape[-2] // k.shape[-2] if q.dim() >= 3 and k.dim() >= 3 and k.shape[-2] else 1
    masks = dict(window_size=(params.window.left, params.window.right), softcap=params.softcap, sinks=sinks)
    if group == 1 or NATIVE_GQA:
        parts = 1
        if group > 1 and KV_PARTS == "auto":
            # The device's SMs, not the margin's CTA cap: the parts change dK / dV's summation order, which
            # sm_margin must not (tests/test_sm_margin.py wants them bitwise equal).
            parts = kv_parts(group, k.shape[-2], _key_blocks(k, varlen), params.window.causal, _sm_count(q.device))
        elif group > 1:
            parts = KV_PARTS  # launch checks it
        return launch(dout, q, k, v, out, lse, params.softmax_scale, params.window.causal, dlse=dlse, varlen=varlen,
                      kv_parts=parts, **masks, **schedule)
    if q.shape[-2] != group * k.shape[-2]:
        raise ValueError(f"q has {q.shape[-2]} heads, not a multiple of k's {k.shape[-2]}")
    # GQA: query head h reads kv head h // group (the forward's convention), so repeat_interleave on the head axis.
    k_full, v_full = (t.repeat_interleave(group, dim=-2) for t in (k, v))
    dq, dk_full, dv_full, *dsinks = launch(dout, q, k_full, v_full, out, lse, params.softmax_scale,
                                           params.window.causal, dlse=dlse, varlen=varlen, **masks, **schedule)
    dk, dv = (sum_head_groups(g, k.shape[-2]).to(k.dtype) for g in (dk_full, dv_full))
    return dq, dk, dv, *dsinks
