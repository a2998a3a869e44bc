"""The native Hopper FP8 forward (kernels/hopper/flash_fwd_fp8.cuh): e4m3 Q, K, Vᵀ with float32 descales -> out, lse.

Both GEMMs run on the FP8 tensor cores; the rounding points are those of the emulation, fa3nn.fp8.reference.
attention_fp8 with block_n = key_block(...) (the kernel's key block: 192 at head dim 128 where block_k allows, else
128), which is the oracle the GPU tests compare with. The tensor cores' FP8 accumulation keeps fewer bits than fp32
(a sum of positive P·V terms carried across key blocks loses ~1.2% of the mean of V per 1000 keys; so does cuDNN's
FP8 forward: benchmarks/NOTES.md), so every default kernel promotes each key block's P·V into fp32 O on the CUDA
cores (kernels/hopper/flash_fwd_fp8.cuh, kPromote).

Layouts (fa3nn.fp8.operands, the contract with the quantization pass; fa3nn.fp8.quantize defines the values):
    q8   e4m3 (batch, seqlen_q, nheads, d)           varlen: (total_q, nheads, d)
    k8   e4m3 (batch, seqlen_k, nheads_kv, d)        varlen: (total_k, nheads_kv, d)
    vt8  e4m3 (batch, nheads_kv, d, seqlen_k_pad)    varlen: (nheads_kv, d, vt_columns(total_k, batch)),
         sequence i's keys at columns vt_starts[i].. (multiples of 16, zeros between sequences); V transposed (FP8
         wgmma reads its B operand K-major only), the key dimension zero-padded to a multiple of 16 so TMA's
         16-byte rules hold for the stride and for every sequence's first column, and the keys permuted inside
         every 16-key group (fa3nn.fp8.operands.vt_group_column: the P fragments' order). A Vᵀ in plain key order
         passes every shape check and gives a wrong output: build it with transpose_v or the fused pass.
    vt_starts int32 (batch + 1,), varlen only: FP8Operands.vt_starts (fa3nn.fp8.operands.vt_starts(cu_seqlens_k)).
    q_descale float32 (batch, nheads, ceil(seqlen_q / block_q)); k_descale, v_descale float32 (batch, nheads_kv,
         ceil(seqlen_k / block_k)); varlen: batch = number of sequences, tiles counted from each sequence's start.
    block_q any positive row count; block_k a multiple of the kernel's key block (128; benchmark variants
         key_block_192*: 192) or >= the longest key sequence (one scale per (batch, head) or per tensor reaches the
         kernel that way).
    out  (batch, seqlen_q, nheads, d) in out_dtype (bf16 or fp16), lse float32 (batch, nheads, seqlen_q), natural
         log; varlen: out (total_q, nheads, d), lse (nheads, total_q). A row attending no key: zeros, lse = -inf.

Launches on torch's current stream and never synchronizes with the host (varlen needs max_seqlen_q/max_seqlen_k
from the caller for that reason).
"""

from __future__ import annotations

import ctypes

import torch

from fa3nn.backends.base import AttnCall
from fa3nn.backends.hopper import VARLEN_DEALS
from fa3nn.backends.hopper_lib import LIBRARY, max_ctas_leaving, tma_ready
from fa3nn.fp8.key_blocks import (
    KEY_BLOCK,
    WIDE_KEY_BLOCKS,
    block_fits_tiles,
    fast_exp2_every,
    native_key_block,
    p8_row_sums,
)
from fa3nn.fp8.operands import VT_PAD, check_vt_starts, padded_keys, vt_columns
from fa3nn.masks import Window

E4M3 = torch.float8_e4m3fn
SUPPORTED_HEADDIMS = (64, 128, 256)
OUT_DTYPES = (torch.bfloat16, torch.float16)
UNMASKED = Window()
# Compile-time variants, for benchmarks (bf16 output, head dims 128 and 256; "fast_exp2", variant 53, is the
# library's path for the recipes' fast_exp2, both output dtypes, every head dim): the default design (one CTA per SM
# walking tiles, every exp2 on MUFU), without pingpong, the other K/V stage count, (d128) a quarter of the exp2s as
# an FP32 polynomial, and the default kernel launched with one CTA per tile (kernels/hopper/flash_fwd_fp8_launch.cuh,
# Fp8Tiles, which gives the measurements behind the defaults).
# Benchmark variants (kernels/hopper/flash_fwd_fp8_launch.cuh). skip_softmax (P = c S, no exp2) and skip_kv_loads
# (K/V stages never loaded) compute WRONG outputs: they time the loop without those parts, for benchmarks/NOTES.md
# only. key_block_192 / key_block_128 (d128): the 192- or 128-key kernel whatever block_k allows best (key_block);
# key_block_192_poly_exp2: the 192-key kernel with a quarter of its exp2s on the FP32 pipe; _no_pingpong: without the
# turn barrier; _skip_exp2 / _skip_row_max / _skip_kv_loads / _skip_softmax_and_kv_loads: without its exp2s / its
# row max tree / its K/V loads / both softmax and loads (WRONG outputs, timing only). The 192-key kernels accumulate
# P V across key blocks on the tensor cores (no per-block fp32 promotion: they lose the mean of V over long key
# ranges, benchmarks/NOTES.md), as do no_promotion (128-key blocks, the overlapped loop: every head dim's default
# before 2026-12-01's eighth session) and the other 128-key variants, except key_block_192_serial: promoted, with
# serial steps (no intra-warpgroup overlap) so that the block accumulator shares the scores' registers (the d128
# default for 192-key tiles on 2026-12-01), serial (= key_block_128): the same on 128-key blocks (d256 with P V in
# two head-dim halves; its default until 2026-12-02), fused_turn (every head dim): serial with one pingpong turn per
# block (P V of the previous block, its promotion and this block's Q K^T; the default at d256, and at d128 where
# 128-key blocks are chosen), and
# key_block_192_fused_turn: the same on 192-key blocks, whose _poly4 form (every 4th exp2 as the FP32 polynomial) is
# d128's default where those are chosen.
# three_consumers (d64): fused_turn with three consumer warpgroups (192-row query tiles, 160 registers each; the d64
# default). key_block_192_fused_turn_poly8: every 8th exp2 as the FP32 polynomial. key_block_256_fused_turn:
# the fused turn on 256-key blocks (block_k a multiple of 256 or one descale per sequence), _poly4 / _poly8 /
# _poly16 with every 4th / 8th / 16th exp2 as the FP32 polynomial; key_block_256_split_s: Q K^T in two key halves,
# the first half's row max while the second is on the tensor cores (d128's default on 256-key blocks until
# 2026-12-03; key_block_256_fused_turn is the one-GEMM form it replaced). fused_turn_w3 (d128): fused_turn (128-key
# blocks) with three consumer warpgroups as d64's default (160 registers each; the K stage wait inside the turn).
# key_block_256_fused_turn_skip_row_max: key_block_256_fused_turn without its row max tree (WRONG output, timing only).
# key_block_256_split_s_int_max / fused_turn_w3_int_max: key_block_256_split_s / fused_turn_w3 with each row's max
# from 3-input integer maxes on the score bits (the same maxima, so bitwise the same output; the first is d128's
# default on 256-key blocks); fused_turn_int_max / three_consumers_int_max / key_block_256_fused_turn_int_max: the
# same for fused_turn (every head dim) / three_consumers (d64) / key_block_256_fused_turn (d128).
# key_block_256_softmax_turns (d128): key_block_256_split_s_int_max with one warpgroup's softmax at a time (a second
# ring of named barriers; a diagnostic, the same output as the default). key_block_256_mma_row_sum (d128):
# key_block_256_split_s_int_max with P's row sums from the P V GEMM (8 rows of e4m3 ones under every Vt panel, P V as
# m64n136k32: the sum of the e4m3 P8, not bitwise the default's output) on two K/V stages; _two_stages: the default's
# kernel on those stages (the ones do not fit beside three). key_block_256_cross_tile (d128's default's kernel on
# 256-key blocks): key_block_256_mma_row_sum with its fused turns chained across tile ends (a tile's last P V and the
# next tile's first Q K^T in one turn, the tile's store inside it; bitwise the same output).
# key_block_256_mma_row_sum was the default before it, key_block_256_split_s_int_max before that. Since 2026-12-04
# the default stores O through shared memory by TMA in dense calls (varlen keeps the direct stores);
# key_block_256_cross_tile is the same kernel with the direct stores (bitwise the same output). l2_sections /
# one_section: the default kernels with the causal tile deal before 2026-12-01 / with one longest-first section
# over every tile, dealt boustrophedon, at any length (the default deals it so beyond the one-pair lengths).
VARIANTS = {"full": 0, "no_pingpong": 1, "other_stages": 2, "poly_exp2": 3, "one_cta_per_tile": 5,
            "skip_softmax": 6, "plain_pv_wait": 7, "skip_kv_loads": 9, "key_block_192": 10,
            "key_block_192_skip_softmax": 11, "key_block_128": 12, "key_block_192_poly_exp2": 13,
            "key_block_192_no_pingpong": 14, "key_block_192_skip_exp2": 15, "key_block_192_skip_row_max": 16,
            "key_block_192_skip_kv_loads": 17, "key_block_192_skip_softmax_and_kv_loads": 18,
            "l2_sections": 19, "no_promotion": 20, "key_block_192_serial": 21, "serial": 22,
            "fused_turn": 24, "key_block_192_fused_turn": 25, "three_consumers": 27,
            "key_block_192_fused_turn_poly4": 28, "key_block_192_fused_turn_poly8": 29,
            "key_block_256_fused_turn": 30, "key_block_256_fused_turn_poly4": 31,
            "key_block_256_fused_turn_poly8": 32, "key_block_256_fused_turn_poly16": 33,
            "key_block_256_split_s": 34, "fused_turn_w3": 35,
            "key_block_256_fused_turn_skip_row_max": 36, "key_block_256_split_s_int_max": 37,
            "fused_turn_w3_int_max": 38, "fused_turn_int_max": 39, "three_consumers_int_max": 40,
            "key_block_256_fused_turn_int_max": 41, "key_block_256_softmax_turns": 43,
            "key_block_256_mma_row_sum": 45, "key_block_256_split_s_int_max_two_stages": 46,
            "key_block_256_linear_exp2_quarter": 48, "key_block_256_linear_exp2_half": 49,
            "key_block_256_linear_exp2_all": 50, "fast_exp2": 53, "key_block_256_cross_tile": 54,
            "one_section": 56}
# Variants that run the default kernels' key block (only the causal tile deal or the promotion differ).
_DEFAULT_KERNELS = ("full", "l2_sections", "one_cta_per_tile", "fast_exp2", "one_section")
_FORCED_KEY_BLOCK = {name: int(name.split("_")[2]) for name in VARIANTS if name.startswith(("key_block_192",
                                                                                              "key_block_256"))}


def sums_rounded_p(headdim: int, block_n: int | None, variant: str = "full") -> bool:
    """Whether the kernel `variant` on block_n-key blocks normalizes by the sum of its rounded P8 (the emulation's
    sum_rounded_p; fa3nn.fp8.key_blocks.p8_row_sums for the defaults), not of the fp32 P."""
    if variant in _DEFAULT_KERNELS:
        return block_n is not None and p8_row_sums(headdim, block_n)
    return variant in ("key_block_256_mma_row_sum", "key_block_256_cross_tile") or variant in _LINEAR_EXP2_EVERY


# Benchmark variants with the linear exp2 on every n-th P fragment register (kernels/hopper/e4m3_exp2.cuh): 48-50,
# d128's 256-key default kernel (45) with it on a quarter / half / all of its scores
_LINEAR_EXP2_EVERY = {"key_block_256_linear_exp2_quarter": 4, "key_block_256_linear_exp2_half": 2,
                      "key_block_256_linear_exp2_all": 1}


def linear_exp2_every(headdim: int, block_n: int | None, variant: str = "full") -> int:
    """The emulation's linear_exp2_every for the kernel `variant` on block_n-key blocks: 0 (every P8 from MUFU's
    exp2) for the default kernels, fa3nn.fp8.key_blocks.fast_exp2_every for them under fast_exp2."""
    if variant == "fast_exp2":
        return fast_exp2_every(headdim, block_n) if block_n is not None else 0
    return _LINEAR_EXP2_EVERY.get(variant, 0)


def key_block(headdim: int, block_k: int, max_seqlen_k: int, variant: str = "full") -> int | None:
    """Keys per block of the kernel `variant` runs with these descale tiles (the emulation's block_n for it), or
    None when block_k fits it not: a block must lie in one k/v descale tile. The default: fa3nn.fp8.key_blocks.
    native_key_block (at head dim 128 beyond 256 keys: 256, else 192, else 128, whichever block_k allows first;
    up to 256 keys 128 first)."""
    if variant in _DEFAULT_KERNELS:
        return native_key_block(headdim, block_k, max_seqlen_k)
    block = _FORCED_KEY_BLOCK.get(variant, KEY_BLOCK)  # the other benchmark variants are 128-key kernels
    return block if block_fits_tiles(block, block_k, max_seqlen_k) else None


def refusal(call: AttnCall, block_k: int, max_seqlen_k: int) -> str | None:
    """Why the native FP8 forward cannot serve this call (None: it can): fa3nn.dispatch.FP8Path's refusal. `call`
    describes the high-precision inputs (AttnCall.of); block_k is the recipe's K/V scale rows (0: one scale per
    sequence), which must fit a kernel's key block (key_block; fp8_forward checks it again)."""
    if call.device_type != "cuda" or call.capability != (9, 0):
        return f"needs a Hopper GPU (sm_90), got {call.device_type} {call.capability}"
    why = shape_refusal(call, block_k, max_seqlen_k)
    if why is not None:
        return why
    if LIBRARY.get() is None:
        return LIBRARY.error
    return None


def shape_refusal(call: AttnCall, block_k: int, max_seqlen_k: int) -> str | None:
    """refusal's part that depends on the call alone (not on the device or the library): whether a native FP8
    kernel exists for it. The emulation asks it too, to model fast_exp2 only where the native kernel would run."""
    if call.dtype not in OUT_DTYPES:
        return f"output dtype {call.dtype} is not supported (bfloat16, float16)"
    if call.headdim != call.headdim_v or call.headdim not in SUPPORTED_HEADDIMS:
        return f"headdim {call.headdim}/{call.headdim_v}: the native FP8 forward supports {SUPPORTED_HEADDIMS}, equal"
    if call.window.sliding:
        return "sliding-window attention is not in the native FP8 forward"
    if call.softcap > 0:
        return "softcap is not in the native FP8 forward"
    if call.nheads % call.nheads_kv:
        return "nheads must be a multiple of nheads_kv"
    if key_block(call.headdim, block_k, max_seqlen_k) is None:
        *wide, last = (*WIDE_KEY_BLOCKS.get(call.headdim, ()), KEY_BLOCK)
        blocks = f"{', '.join(map(str, wide))} or {last}" if wide else str(last)
        return f"block_k={block_k} is neither a multiple of {blocks} (the kernel's key block) nor >= the longest key " \
               f"sequence ({max_seqlen_k})"
    return None


def _check_e4m3(name: str, t: torch.Tensor, dims: int) -> None:
    if t.dtype != E4M3:
        raise TypeError(f"{name} must be float8_e4m3fn (fa3nn.fp8.quantize writes it), got {t.dtype}")
    if t.dim() != dims:
        raise ValueError(f"{name} must have {dims} dims here, got shape {tuple(t.shape)}")


def _descale(name: str, t: torch.Tensor, batch: int, heads: int, rows: int, block: int) -> torch.Tensor:
    tiles = max(1, -(-rows // block))
    if t.dtype != torch.float32:
        raise TypeError(f"{name} must be float32 (fa3nn.fp8.quantize's descales), got {t.dtype}")
    if t.dim() != 3 or t.shape[0] != batch or t.shape[1] != heads or t.shape[2] < tiles:
        raise ValueError(
            f"{name} must be (batch={batch}, heads={heads}, tiles>={tiles}) for {rows} rows in blocks of {block}, "
            f"got {tuple(t.shape)}"
        )
    return t if t.stride(-1) == 1 else t.contiguous()


def fp8_forward(
    q8: torch.Tensor,
    k8: torch.Tensor,
    vt8: torch.Tensor,
    q_descale: torch.Tensor,
    k_descale: torch.Tensor,
    v_descale: torch.Tensor,
    block_q: int,
    block_k: int,
    softmax_scale: float,
    window: Window = UNMASKED,
    cu_seqlens_q: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    max_seqlen_q: int | None = None,
    max_seqlen_k: int | None = None,
    out_dtype: torch.dtype = torch.bfloat16,
    out: torch.Tensor | None = None,
    lse: torch.Tensor | None = None,
    variant: str = "full",
    vt_starts: torch.Tensor | None = None,
    library: ctypes.CDLL | None = None,
    fast_exp2: bool = False,
    sm_margin: int = 0,
    varlen_deal: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the FP8 forward (layouts in the module docstring); returns (out, lse). `window` may be unmasked or
    causal (bottom-right aligned, fa3nn.masks). The positional arguments are fa3nn.dispatch.FP8Path's kernel
    signature (dense calls may pass cu_seqlens None with any max_seqlen). `out`/`lse` may be given preallocated
    (tests pass NaN-poisoned ones); `variant` picks a benchmark variant (VARIANTS). vt_starts: varlen vt8's
    per-sequence first columns (FP8Operands.vt_starts), computed from cu_seqlens_k when None; they must come from
    fa3nn.fp8.operands.vt_starts (multiples of 16 by construction, not re-checked: that would be a host sync).
    `library` (a hopper_build.load() result): another build of the library, for benchmarks. fast_exp2 (the FP8
    recipes' field): the default kernels with the linear exp2 where they have it (fa3nn.fp8.key_blocks.
    fast_exp2_every), the same as variant "fast_exp2". sm_margin: SMs left free for overlapping kernels
    (hopper_lib.max_ctas_leaving; variant "one_cta_per_tile" launches one CTA per tile whatever it says).
    varlen_deal: how a packed call's tiles reach the CTAs, "dynamic" (a counter hands each CTA its next tile as it
    finishes one), "static" (CTA i takes tiles i, i + grid, ...) or "auto" (dynamic; fa3nn::fwd_fp8 passes
    fa3nn.backends.hopper.varlen_deal_for's choice, which knows the lengths). Only the d128 kernel on 256-key blocks
    (the default beyond 256 keys where the descale tiles allow it, variants "full" and "fast_exp2") deals
    dynamically; every other kernel, and every dense call, statically (kernels/hopper/flash_fwd_fp8.cuh kDynamic)."""
    if varlen_deal not in VARLEN_DEALS:
        raise ValueError(f"varlen_deal must be one of {VARLEN_DEALS}, got {varlen_deal!r}")
    if not isinstance(fast_exp2, bool):
        raise TypeError(f"fast_exp2 must be a bool, got {fast_exp2!r}")
    if fast_exp2:
        if variant not in ("full", "fast_exp2"):
            raise ValueError(f"fast_exp2 selects the default kernels' linear exp2; variant {variant!r} is another "
                             "kernel (pass variant='full')")
        variant = "fast_exp2"
    varlen = cu_seqlens_q is not None
    if varlen != (cu_seqlens_k is not None):
        raise ValueError("cu_seqlens_q and cu_seqlens_k must be given together")
    dims = 3 if varlen else 4
    for name, t in (("q8", q8), ("k8", k8), ("vt8", vt8)):
        _check_e4m3(name, t, dims)
    headdim = q8.shape[-1]
    if headdim not in SUPPORTED_HEADDIMS or k8.shape[-1] != headdim or vt8.shape[-2] != headdim:
        raise ValueError(
            f"head dims q8 {headdim}, k8 {k8.shape[-1]}, vt8 {vt8.shape[-2]}: the FP8 forward needs them equal and in "
            f"{SUPPORTED_HEADDIMS}; use the emulation (fa3nn.fp8.attention_fp8) for others"
        )
    if window.sliding:
        raise ValueError(f"window {window}: the native FP8 forward supports no mask or causal only; use the emulation")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"out_dtype must be torch.bfloat16 or torch.float16, got {out_dtype}")
    if not softmax_scale > 0:
        raise ValueError(f"softmax_scale must be positive, got {softmax_scale}")
    if varlen:
        if max_seqlen_q is None or max_seqlen_k is None:
            raise ValueError("varlen calls need max_seqlen_q and max_seqlen_k (ints; reading cu_seqlens would sync)")
        seqlen_q, nheads, _ = q8.shape
        seqlen_k, nheads_kv, _ = k8.shape
        batch = cu_seqlens_q.numel() - 1
        vt_expect = (nheads_kv, headdim)
    else:
        batch, seqlen_q, nheads, _ = q8.shape
        seqlen_k, nheads_kv = k8.shape[1], k8.shape[2]
        max_seqlen_q, max_seqlen_k = seqlen_q, seqlen_k
        vt_expect = (batch, nheads_kv, headdim)
        if k8.shape[0] != batch:
            raise ValueError(f"k8 batch {k8.shape[0]} != q8 batch {batch}")
    columns = vt_columns(seqlen_k, batch) if varlen else padded_keys(seqlen_k)
    if tuple(vt8.shape[:-1]) != vt_expect or vt8.shape[-1] < columns or vt8.shape[-1] % VT_PAD:
        raise ValueError(
            f"vt8 must be {(*vt_expect, columns)} (V transposed, keys zero-padded to a multiple of {VT_PAD}"
            f"{', every sequence at a 16-aligned column' if varlen else ''}; fa3nn.fp8.operands.transpose_v), got "
            f"{tuple(vt8.shape)}"
        )
    if varlen:  # every sequence's first vt8 column a multiple of 16 (module docstring): shapes checked, no sync
        vt_starts = check_vt_starts(vt8, vt_starts, cu_seqlens_k, seqlen_k)
    if nheads_kv <= 0 or nheads % nheads_kv:
        raise ValueError(f"nheads ({nheads}) must be a multiple of nheads_kv ({nheads_kv})")
    if not isinstance(block_q, int) or block_q <= 0:
        raise ValueError(f"block_q must be a positive int, got {block_q!r}")
    if not isinstance(block_k, int) or block_k <= 0 or key_block(headdim, block_k, max_seqlen_k, variant) is None:
        block = _FORCED_KEY_BLOCK.get(variant, KEY_BLOCK)
        raise ValueError(
            f"block_k={block_k!r}: the FP8 kernel needs one k/v descale per {block}-key block, so block_k must be "
            f"a multiple of {block} or >= the longest key sequence ({max_seqlen_k})"
        )
    q_descale = _descale("q_descale", q_descale, batch, nheads, max_seqlen_q, block_q)
    k_descale = _descale("k_descale", k_descale, batch, nheads_kv, max_seqlen_k, block_k)
    v_descale = _descale("v_descale", v_descale, batch, nheads_kv, max_seqlen_k, block_k)
    if q8.device.type != "cuda":
        raise RuntimeError(f"the native FP8 forward needs CUDA tensors, got {q8.device}")
    lib = library if library is not None else LIBRARY.require()
    max_ctas = max_ctas_leaving(sm_margin, q8.device)
    q8, k8, vt8 = tma_ready(q8), tma_ready(k8), tma_ready(vt8)
    if out is None:
        out = torch.empty(*q8.shape[:-1], headdim, dtype=out_dtype, device=q8.device)
    if lse is None:
        lse_shape = (nheads, seqlen_q) if varlen else (batch, nheads, seqlen_q)
        lse = torch.empty(lse_shape, dtype=torch.float32, device=q8.device)
    if varlen:
        strides = [s for t in (q8, k8, vt8, out) for s in (0, *t.stride()[:2])]
        cu_q = cu_seqlens_q.to(torch.int32).contiguous()
        cu_k = cu_seqlens_k.to(torch.int32).contiguous()
    else:
        strides = [s for t in (q8, k8, vt8, out) for s in t.stride()[:3]]
        cu_q = cu_k = None
    # The dynamic deal's counter (zeroed by the library on the stream), one per call as the bf16 forward's.
    dynamic = varlen and varlen_deal != "static"
    counter = torch.empty(1, dtype=torch.int32, device=q8.device) if dynamic else None
    stride_array = (ctypes.c_int64 * 12)(*strides)
    descale_strides = (ctypes.c_int64 * 6)(*(s for t in (q_descale, k_descale, v_descale) for s in t.stride()[:2]))
    with torch.cuda.device(q8.device):
        stream = torch.cuda.current_stream(q8.device).cuda_stream
        status = lib.fa3nn_hopper_fp8_fwd(
            q8.data_ptr(), k8.data_ptr(), vt8.data_ptr(), out.data_ptr(), lse.data_ptr(),
            None if cu_q is None else cu_q.data_ptr(), None if cu_k is None else cu_k.data_ptr(),
            vt_starts.data_ptr() if varlen else None,
            q_descale.data_ptr(), k_descale.data_ptr(), v_descale.data_ptr(),
            batch, seqlen_q, seqlen_k, vt8.shape[-1], max_seqlen_q, max_seqlen_k, nheads, nheads_kv, headdim,
            stride_array, descale_strides, block_q, block_k, float(softmax_scale), int(window.causal),
            int(out_dtype == torch.bfloat16), VARIANTS[variant], max_ctas,
            None if counter is None else counter.data_ptr(), stream,
        )
    if status != 0:
        raise RuntimeError(f"fa3nn hopper FP8 forward failed: {lib.fa3nn_hopper_last_error().decode()}")
    return out, lse
