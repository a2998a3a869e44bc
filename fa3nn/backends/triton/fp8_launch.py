"""Launcher of the Triton FP8 forward (fp8_kernels.py): tiles, grid, outputs.

`forward_fp8` has the signature every FP8 forward kernel of fa3nn shares (fa3nn.dispatch.FP8Path): the e4m3
operands of fa3nn.fp8.operands and the call's parameters in, (out, lse) out.

Tiles. A key block must not straddle two V scale tiles (the V descale is folded into the per-block rescale), so
BLOCK_N divides block_k, unless one scale covers the whole sequence (block_k >= seqlen_k). The emulation
(fa3nn.fp8.reference) walks keys in blocks of 128: with BLOCK_N = 128 the kernel rounds P at the same running maxima;
another BLOCK_N moves only P's e4m3 rounding (tests/test_fp8_reference.py, ~33 dB between the two).
"""

from __future__ import annotations

import math

import torch
import triton

from fa3nn.backends.base import lse_dtype
from fa3nn.backends.triton import configs
from fa3nn.backends.triton.configs import Tile, next_power_of_2
from fa3nn.backends.triton.fp8_kernels import _fp8_fwd_kernel
from fa3nn.backends.triton.kernels import softcap_mode
from fa3nn.fp8.operands import check_vt_starts
from fa3nn.masks import Window

LOG2E = math.log2(math.e)

# First tile = the default (autotuning off), per (head dim, masked: causal or a window). Started from
# FlashAttention-3's FP8 tiles (128 x 128 up to headdim 128, 128 x 64..128 at 256). Measured on the H200 (Triton
# 3.6, kernel only, batch x seqlen = 16k tokens, nheads x headdim = 2048; benchmarks/NOTES.md "seventeenth
# session", s17c-h200-20261203-0522), TFLOP/s at 2k / 16k keys:
#   d128 non-causal: (64, 128, 4, 3) 501 / 585, (128, 128, 8, 3) 476 / 529, (128, 64, 8, 3) 443 / 488,
#                    (128, 128, 8, 2) 407 / 486;
#   d128 causal:     (128, 128, 8, 3) 318 / 503, (128, 64, 8, 3) 295 / 473, (128, 128, 8, 2) 299 / 443,
#                    (64, 128, 4, 3) 260 / 410;
#   d256 (both):     (128, 64, 8, 2) 315 / 328 non-causal, 229 / 337 causal; (64, 64, 8, 2) 275 / 301, 216 / 282;
#                    (128, 32, 8, 3) 261 / 284, 178 / 271; (64, 32, 8, 3) 234 / 251, 180 / 249.
# (Before the Vᵀ columns were declared 16-aligned (fp8_kernels._fp8_fwd_inner) every tile ran 1.1-3x slower and the
# order was another.) d64 (both; s18a-h200-20261203-0538): (128, 64, 4, 3) 351 / 377 non-causal, 260 / 358 causal;
# (64, 128, 4, 3) 311 / 351, 219 / 360; (128, 128, 8, 3) 288 / 318, 233 / 349.
_D128 = (Tile(64, 128, 4, 3), Tile(128, 128, 8, 3), Tile(128, 64, 8, 3), Tile(128, 128, 8, 2))
_D128_MASKED = (Tile(128, 128, 8, 3), Tile(128, 64, 8, 3), Tile(128, 128, 8, 2), Tile(64, 128, 4, 3))
_D64 = (Tile(128, 64, 4, 3), Tile(64, 128, 4, 3), Tile(128, 128, 8, 3))
_D256 = (Tile(128, 64, 8, 2), Tile(64, 64, 8, 2), Tile(128, 32, 8, 3), Tile(64, 32, 8, 3), Tile(128, 128, 8, 2),
         Tile(64, 64, 4, 2))
FP8_FWD: dict[tuple[int, bool], tuple[Tile, ...]] = {
    (64, False): _D64, (64, True): _D64,
    (128, False): _D128, (128, True): _D128_MASKED,
    (256, False): _D256, (256, True): _D256,
}
INTERPRETER_TILE = Tile(32, 16, 4, 1)  # small, so that test shapes cross several query and key blocks


def _fits_scale_tiles(tile: Tile, block_k: int, seqlen_k: int) -> bool:
    return block_k >= seqlen_k or block_k % tile.block_n == 0


def fp8_tiles(block_d: int, block_k: int, seqlen_k: int, masked: bool) -> list[Tile]:
    """Candidate tiles in preference order; never empty (block_k is a multiple of 16, so BLOCK_N = 16 always fits).
    masked: causal or a window (Window.unmasked false)."""
    tiles = [t for t in FP8_FWD[max(64, block_d), masked] if _fits_scale_tiles(t, block_k, seqlen_k)]
    if not tiles:
        block_n = next(n for n in (128, 64, 32, 16) if block_k % n == 0)
        tiles = [Tile(128 if block_d <= 128 else 64, block_n, 8 if block_d <= 128 else 4, 2)]
    return tiles


def default_tile(device: torch.device, block_d: int, block_k: int, seqlen_k: int, masked: bool) -> Tile:
    """The tile a call runs with when autotuning is off (FA3NN_TRITON_AUTOTUNE=0), as the GPU tests do."""
    if device.type != "cuda":
        return INTERPRETER_TILE
    return fp8_tiles(block_d, block_k, seqlen_k, masked)[0]


_autotuned: dict[tuple, object] = {}


def _tuner(tiles: list[Tile]):
    key = tuple(tiles)
    if key not in _autotuned:
        candidates = [triton.Config({"BLOCK_M": t.block_m, "BLOCK_N": t.block_n}, num_warps=t.num_warps,
                                    num_stages=t.num_stages) for t in tiles]
        _autotuned[key] = triton.autotune(candidates, key=["BLOCK_D", "MASK_KIND", "SEQ_BUCKET"])(_fp8_fwd_kernel)
    return _autotuned[key]


def forward_fp8(
    q8: torch.Tensor,
    k8: torch.Tensor,
    vt8: torch.Tensor,
    q_descale: torch.Tensor,
    k_descale: torch.Tensor,
    v_descale: torch.Tensor,
    block_q: int,
    block_k: int,
    softmax_scale: float,
    window: Window,
    cu_seqlens_q: torch.Tensor | None,
    cu_seqlens_k: torch.Tensor | None,
    max_seqlen_q: int | None,
    max_seqlen_k: int | None,
    out_dtype: torch.dtype,
    softcap: float = 0.0,
    tile: Tile | None = None,
    vt_starts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """out (q8's shape with v's head dim, out_dtype) and float32 lse ((batch, nheads, seqlen_q) dense, (nheads,
    total_q) packed). `tile` pins a tile (tests); otherwise the table's first, or the autotuner's pick. vt_starts:
    packed vt8's per-sequence first columns (FP8Operands.vt_starts); computed from cu_seqlens_k when not given."""
    varlen = cu_seqlens_q is not None
    if varlen:
        batch, seqlen_q, seqlen_k = cu_seqlens_q.numel() - 1, int(max_seqlen_q), int(max_seqlen_k)
        vt_starts = check_vt_starts(vt8, vt_starts, cu_seqlens_k, k8.shape[0])
    else:
        batch, seqlen_q, seqlen_k = q8.shape[0], q8.shape[1], k8.shape[1]
    nheads, nheads_kv, headdim, headdim_v = q8.shape[-2], k8.shape[-2], q8.shape[-1], vt8.shape[-2]
    block_d = max(32, next_power_of_2(headdim))  # an e4m3 tensor-core step reduces over 32 elements
    block_dv = max(32, next_power_of_2(headdim_v))
    q_descale, k_descale, v_descale = (d.contiguous() for d in (q_descale, k_descale, v_descale))
    if k_descale.stride() != v_descale.stride():
        raise ValueError(f"k_descale {tuple(k_descale.shape)} and v_descale {tuple(v_descale.shape)} must have "
                         f"one layout (batch, nheads_kv, tiles)")
    out = torch.empty(*q8.shape[:-1], headdim_v, dtype=out_dtype, device=q8.device)
    lse_shape = (nheads, q8.shape[0]) if varlen else (batch, nheads, seqlen_q)
    lse = torch.empty(lse_shape, dtype=lse_dtype(out_dtype), device=q8.device)

    if softcap > 0:  # scores = softcap * tanh(scale * qk / softcap), in log2 units
        qk_scale, softcap2 = softmax_scale / softcap, softcap * LOG2E
    else:
        qk_scale, softcap2 = softmax_scale * LOG2E, 1.0

    def strides3(x):
        return (0, x.stride(0), x.stride(1)) if varlen else (x.stride(0), x.stride(1), x.stride(2))

    vt_strides = (0, vt8.stride(0), vt8.stride(1)) if varlen else (vt8.stride(0), vt8.stride(1), vt8.stride(2))
    lse_strides = (0, lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1))
    mask_kind = 0 if window.unmasked else 1 if window.causal and not window.local else 2
    args = (
        q8, k8, vt8, q_descale, k_descale, v_descale, out, lse,
        cu_seqlens_q if varlen else q_descale, cu_seqlens_k if varlen else q_descale,
        vt_starts if varlen else q_descale,
        *strides3(q8), *strides3(k8), *vt_strides, q_descale.stride(0), q_descale.stride(1),
        k_descale.stride(0), k_descale.stride(1), *strides3(out), *lse_strides,
        seqlen_q, seqlen_k, nheads // nheads_kv, block_q, block_k, q_descale.shape[-1],
        qk_scale, softcap2, *window.kernel_sides(seqlen_q, seqlen_k),
        mask_kind, configs.seq_bucket(max(seqlen_q, seqlen_k)),
    )
    constexprs = dict(
        HEADDIM=headdim, HEADDIM_V=headdim_v, BLOCK_D=block_d, BLOCK_DV=block_dv, IS_VARLEN=varlen,
        HAS_LEFT=window.left >= 0, HAS_RIGHT=window.right >= 0, HAS_SOFTCAP=softcap_mode(softcap),
        SOFTWARE_CAST=q8.device.type == "cpu",
    )

    def grid(block_m):
        return (triton.cdiv(seqlen_q, block_m), nheads, batch)

    if tile is None and q8.device.type == "cuda" and configs.autotune_enabled():
        tiles = fp8_tiles(block_d, block_k, seqlen_k, not window.unmasked)
        if len(tiles) > 1:
            _tuner(tiles)[lambda meta: grid(meta["BLOCK_M"])](*args, **constexprs)
            return out, lse
    if tile is None:
        tile = default_tile(q8.device, block_d, block_k, seqlen_k, not window.unmasked)
    if not _fits_scale_tiles(tile, block_k, seqlen_k):
        raise ValueError(f"tile BLOCK_N={tile.block_n} straddles V scale tiles of block_k={block_k} rows; pick a "
                         f"BLOCK_N that divides block_k")
    _fp8_fwd_kernel[grid(tile.block_m)](*args, **constexprs, BLOCK_M=tile.block_m, BLOCK_N=tile.block_n,
                                        num_warps=tile.num_warps, num_stages=tile.num_stages)
    return out, lse
