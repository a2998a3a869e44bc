"""Launchers: tensor layouts and strides, tile choice (table or autotune), grids, output allocation.

Dense tensors are (batch, seqlen, heads, dim); packed (varlen) tensors are (total, heads, dim) and are passed with
batch stride 0 plus cu_seqlens. lse, dlse and the backward's delta share one layout: (batch, heads, seqlen_q) dense,
(heads, total_q) packed.

The forward reads Q, K, V through TMA tensor descriptors (triton.tools.tensor_descriptor) on sm_90+ when the
installed Triton has them and the tensors allow a (rows, heads * dim) view with power-of-two head dims;
FA3NN_TRITON_TMA=0 forces the pointer path, =1 forces descriptors (also under the interpreter, for tests).

`POISON_OUTPUTS` (or FA3NN_TRITON_POISON=1) allocates every output NaN-filled instead of uninitialized, so a test
sees any element a kernel fails to write.
"""

from __future__ import annotations

import math
import os

import torch
import triton

from fa3nn.backends.base import AttnParams, Varlen, saved_lse_dtype
from fa3nn.backends.triton import configs
from fa3nn.backends.triton import kernels as K
from fa3nn.backends.triton.configs import next_power_of_2
from fa3nn.sinks import sinks_gradient_of_delta

try:
    from triton.tools.tensor_descriptor import TensorDescriptor  # Triton >= 3.4
except ImportError:
    TensorDescriptor = None

POISON_OUTPUTS = configs.env_switch("FA3NN_TRITON_POISON", "0")
ATOMIC_DQ = configs.env_switch("FA3NN_TRITON_ATOMIC_DQ", "0")
# On by default (bitwise the same results; FA3NN_TRITON_UNMASKED_ROW_STATS=0 turns it off): the dK/dV kernel's
# unmasked run loads lse/delta without the row checks that cannot fire there (kernels._bwd_dkdv_kernel; -24%
# instructions per step at d128, sm_90a). H200, Triton 3.6, 2026-11-30 (scripts/triton_tile_ab.py, pinned tiles):
# backward +4.2-6.2% at d128 (2048, 8192; causal and not), +15-28% at d64.
UNMASKED_ROW_STATS = configs.env_switch("FA3NN_TRITON_UNMASKED_ROW_STATS", "1")
# At head dims >= 256 when the output split is off (FA3NN_TRITON_DKDV_OUTPUTS=joint; the output split is the d256
# default since 2026-12-02, +12..+23% over this), or with the atomic dQ (FA3NN_TRITON_DKDV_SPLIT_D=1 turns it
# off): the dK/dV kernel runs two programs
# per key block, each accumulating half of the dK/dV columns (scores and dP still over the whole head dim): 1.5x its
# matmul work for half the accumulator registers, so it takes wgmma-sized tiles without spilling in its loop (every
# one-program d256 tile spills there: Triton 3.6 offline, 64x64/8 warps 138-148 words). H200, Triton 3.6,
# 2026-12-01 (scripts/triton_tile_ab.py, its tiles configs.PINNED["dkdv_split"]): whole backward +11-22% (2048:
# 157 -> 190 TFLOP/s non-causal, 139 -> 161 causal; 8192: 165 -> 201, 177 -> 197). Each program loads its part of
# Q and dO besides the whole tiles (configs.shared_memory_bytes counts it). With the opt-in atomic dQ
# (FA3NN_TRITON_ATOMIC_DQ=1) each part adds its dQ columns (kind "fused_split"; H200 2026-12-01: whole backward
# 0.82-0.86x the default split backward at d256 2048 / 8192, so it stays opt-in).
DKDV_SPLIT_D = os.environ.get("FA3NN_TRITON_DKDV_SPLIT_D", str(configs.DKDV_SPLIT_PARTS))
DKDV_SPLIT_MIN_BLOCK_D = 256
# The dQ kernel's K and V loads (FA3NN_TRITON_DQ_TMA): "auto" takes configs.TMA_LOADS["dq"] (d64 and d128, measured
# with the batched views), "1" descriptors wherever _tma_views allows, "0" pointers. Rows past seqlen_k are zeroed
# in the masked run unless the views are batched.
DQ_TMA_LOADS = os.environ.get("FA3NN_TRITON_DQ_TMA", "auto")
# The key-block kernels' Q and dO loads (FA3NN_TRITON_DKDV_TMA): "auto" takes configs.TMA_LOADS for the kernel
# ("dkdv" d128: through tensor descriptors, with its 64x64/4w/2 tiles; "dv" d256 up to 1k), "1" descriptors for
# every key-block kernel, "0" pointers.
# Descriptors only where _tma_views allows (sm_90, not with the head-dim split, whose parts load by pointers); rows
# past seqlen_q are zeroed in the masked run unless the views are batched.
DKDV_TMA_LOADS = os.environ.get("FA3NN_TRITON_DKDV_TMA", "auto")
# The descriptors' views for dense calls (FA3NN_TRITON_TMA_BATCHED): "auto" takes configs.TMA_BATCHED's entry per
# direction (the forward's Q / K / V; the backward's dK/dV Q / dO and dQ K / V), "1" the (batch, seqlen, heads *
# dim) views wherever descriptors are used, "0" the (batch * seqlen, heads * dim) ones. Through the batched views
# the copy engine zero-fills rows past each sequence and the masked runs skip zeroing them through registers
# (offline, Triton 3.6, d128 dK/dV 64x64/4w/2: causal masked loops 1395 / 1160 -> 944 / 846 instructions).
TMA_BATCHED = os.environ.get("FA3NN_TRITON_TMA_BATCHED", "auto")
# The dK/dV kernel's score orientation (FA3NN_TRITON_DKDV_QUERY_MAJOR): "auto" takes configs.QUERY_MAJOR's entry
# for the default backward's "dkdv" kernel (query-major at head dims <= 64, measured +7..+12% on the whole
# backward; key-major elsewhere and for the other kernels), "1" forces query-major, "0"
# key-major.
DKDV_QUERY_MAJOR = os.environ.get("FA3NN_TRITON_DKDV_QUERY_MAJOR", "auto")
# The output split (FA3NN_TRITON_DKDV_OUTPUTS): "auto" takes configs.OUTPUT_SPLIT's entry, "split" forces two
# key-block kernels ("dv": S, P, dV; "dk": S, dP, dK) instead of the one dK/dV kernel, "joint" forces the one
# kernel. Not with the atomic dQ; at head dims >= 256 it replaces the head-dim split.
DKDV_OUTPUTS = os.environ.get("FA3NN_TRITON_DKDV_OUTPUTS", "auto")
# On by default (FA3NN_TRITON_BWD_STREAMS=0 turns it off): the dQ kernel runs on a second CUDA stream, concurrently
# with the key-block kernel(s) (they share no output), so one kernel's last partial wave of programs overlaps the
# other's instead of leaving SMs idle at each kernel boundary. Bitwise the same gradients. H200, Triton 3.6,
# 2026-12-02 (scripts/triton_tile_ab.py, whole backward): +1..+4% at d64 / d128 512-16k, causal and not (d128 2048
# 359 -> 369 non-causal, 282 -> 295 causal), +1..+4% at d256 (results/outsplit-h200-20261202-1528, o2-…-1529).
BWD_STREAMS = configs.env_switch("FA3NN_TRITON_BWD_STREAMS", "1")
LOG2E = math.log2(math.e)
_side_streams: dict[int, torch.cuda.Stream] = {}


def _side_stream(device: torch.device) -> torch.cuda.Stream:
    """One extra stream per device for the backward's concurrent kernel (created once: streams are not freed)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _side_streams:
        _side_streams[index] = torch.cuda.Stream(device=index)
    return _side_streams[index]


def dkdv_split(block_d: int, block_dv: int, atomic_dq: bool) -> int:
    """Head-dim parts of the dK/dV kernel for this call: DKDV_SPLIT_D where the head dim is wide enough, else 1.
    With the atomic dQ each part adds its own dQ columns (a head dim of V unlike Q's would give those parts other
    widths: not split)."""
    choices = ("1", str(configs.DKDV_SPLIT_PARTS))
    if str(DKDV_SPLIT_D) not in choices:
        raise ValueError(f"FA3NN_TRITON_DKDV_SPLIT_D={DKDV_SPLIT_D}: use 1 (off) or {choices[1]} (the default)")
    if min(block_d, block_dv) < DKDV_SPLIT_MIN_BLOCK_D or (atomic_dq and block_d != block_dv):
        return 1
    return int(DKDV_SPLIT_D)


def _tma_switch() -> bool | None:
    """FA3NN_TRITON_TMA: True (1) descriptors wherever the views allow, on any device (offline compiles on the
    CPU), False (0) never, None (auto) on sm_90+ GPUs."""
    return configs.env_switch("FA3NN_TRITON_TMA", "auto")


def dkdv_query_major(kind: str, block_d: int, causal: bool, max_seqlen: int, pointers: bool = False) -> bool:
    """Whether the key-block kernel of `kind` takes query-major scores (DKDV_QUERY_MAJOR); "auto" only where the
    tile table was measured that way (configs.QUERY_MAJOR, the "dkdv" kernel; `pointers` as configs.pinned)."""
    forced = configs.switch(DKDV_QUERY_MAJOR, "FA3NN_TRITON_DKDV_QUERY_MAJOR", auto=True)
    if forced is not None:
        return forced
    return kind == "dkdv" and configs.query_major(block_d, causal, max_seqlen, pointers)


def tma_loads(kind: str, block_d: int, causal: bool, max_seqlen: int) -> bool:
    """Whether the kernel of `kind` asks for its streamed operands through descriptors: the dQ kernel's K / V
    (DQ_TMA_LOADS) or a key-block kernel's Q / dO (DKDV_TMA_LOADS); "auto" only where its tiles were measured that
    way (configs.TMA_LOADS: the "dkdv", "dv" and "dq" kernels)."""
    switch, env = (DQ_TMA_LOADS, "FA3NN_TRITON_DQ_TMA") if kind == "dq" else (DKDV_TMA_LOADS, "FA3NN_TRITON_DKDV_TMA")
    forced = configs.switch(switch, env, auto=True)
    return forced if forced is not None else configs.tma_loads(kind, block_d, causal, max_seqlen)


def tma_batched(direction: str, block_d: int, causal: bool, max_seqlen: int) -> bool:
    """Whether a dense call's descriptors of `direction` ("fwd" / "bwd") take the (batch, seqlen, heads * dim) views
    (TMA_BATCHED; "auto": configs.TMA_BATCHED)."""
    forced = configs.switch(TMA_BATCHED, "FA3NN_TRITON_TMA_BATCHED", auto=True)
    return forced if forced is not None else configs.tma_batched(direction, block_d, causal, max_seqlen)


def key_block_kinds(block_d: int, block_dv: int, atomic_dq: bool, causal: bool, max_seqlen: int) -> tuple[str, ...]:
    """The configs kinds of the backward's key-block kernels for this call, in launch order: the output split's
    ("dv", "dk", or with the atomic dQ "dv", "dk_dq") where DKDV_OUTPUTS asks for it, else the one kernel of
    dkdv_kind."""
    if DKDV_OUTPUTS not in ("auto", "joint", "split"):
        raise ValueError(f"FA3NN_TRITON_DKDV_OUTPUTS={DKDV_OUTPUTS}: use auto (the default), split or joint")
    if DKDV_OUTPUTS == "split" or (DKDV_OUTPUTS == "auto" and configs.output_split(block_d, causal, max_seqlen)):
        return ("dv", "dk_dq" if atomic_dq else "dk")
    return (dkdv_kind(block_d, block_dv, atomic_dq),)


def dkdv_kind(block_d: int, block_dv: int, atomic_dq: bool) -> str:
    """The configs kind (tile table) of the backward's key-block kernel for this call."""
    split = dkdv_split(block_d, block_dv, atomic_dq) > 1
    if atomic_dq:
        return "fused_split" if split else "fused"
    return "dkdv_split" if split else "dkdv"


def _tma_views(*tensors, shape, batched: bool = False) -> tuple | None:
    """(rows, heads * dim) views of the (batch, seqlen, heads, dim) or packed tensors for tensor descriptors
    ((batch, seqlen, heads * dim) for dense calls when `batched`, tma_batched's answer), or None where the pointer
    path must serve."""
    mode = _tma_switch()
    first = tensors[0]
    if mode is False or (mode is None and (first.device.type != "cuda" or _device(first.device)[0] < 9)):
        return None
    if TensorDescriptor is None:
        return None
    if shape.headdim != shape.block_d or shape.headdim_v != shape.block_dv:
        return None  # a padded block would read the next head's columns
    batched = batched and not shape.varlen
    views = []
    for x in tensors:
        lead = x.shape[:2] if batched else (x.shape[0] if shape.varlen else x.shape[0] * x.shape[1],)
        try:
            view = x.view(*lead, x.shape[-2] * x.shape[-1])
        except RuntimeError:
            return None
        if view.data_ptr() % 16 or any((stride * view.element_size()) % 16 for stride in view.stride()[:-1]):
            return None
        views.append(view)
    return tuple(views)


def _views_rank(views: tuple | None) -> int | None:
    """The rank of _tma_views' views (2: (rows, heads * dim), 3: batched), None for the pointer path."""
    return None if views is None else views[0].dim()


def _tma_mode(views: tuple | None) -> int:
    """The kernels' USE_TMA / QDO_TMA for _tma_views' result: 0 pointers, 1 (rows, heads * dim) views, 2 the
    (batch, seqlen, heads * dim) ones."""
    return 0 if views is None else views[0].dim() - 1


def _box(rank: int, rows: int, width: int) -> list[int]:
    """A descriptor's block shape: `rows` x `width` (one head's columns), behind a batch extent of 1 on 3-D views."""
    return [1] * (rank - 2) + [rows, width]


def _descriptor(view: torch.Tensor, nheads: int):
    """A tensor descriptor over one of _tma_views' views, whose tile is one head's columns: block shapes are
    placeholders until the tile is known (_set_tma_block_shapes)."""
    return TensorDescriptor.from_tensor(view, _box(view.dim(), 16, view.shape[-1] // nheads))


def _dq_reduce_target(dq_acc: torch.Tensor, shape) -> object | None:
    """A TMA descriptor over the fp32 dQ accumulator's (batch, seqlen, heads * dim) view, for the atomic backward
    to add whole tiles with `cp.reduce.async.bulk` (clipped at seqlen by the copy engine); None where the
    per-element atomics must serve: varlen (a tile would reach into the next sequence), padded head dims, no
    descriptors (Triton < 3.4, pre-Hopper GPUs, the interpreter), FA3NN_TRITON_TMA=0 (=1 forces them, for
    offline compiles on the CPU)."""
    mode = _tma_switch()
    if mode is False or TensorDescriptor is None or shape.varlen or shape.headdim != shape.block_d:
        return None
    if mode is None and (dq_acc.device.type != "cuda" or _device(dq_acc.device)[0] < 9):
        return None
    view = dq_acc.view(dq_acc.shape[0], dq_acc.shape[1], dq_acc.shape[2] * dq_acc.shape[3])
    return TensorDescriptor.from_tensor(view, [1, 16, shape.headdim])  # block shape set per tile at launch


def _set_tma_block_shapes(nargs: dict) -> None:
    """Autotuner pre-hook (and the pinned path's): the descriptors' block shapes follow the tile being tried (Q is
    a descriptor in the forward and, with QDO_TMA, in the dK/dV kernel beside dO; the dQ kernel's USE_TMA covers K
    and V)."""
    for name, width in (("Q", "HEADDIM"), ("dOut", "HEADDIM_V")):  # query-row tiles: the forward's Q, dK/dV's Q, dO
        if TensorDescriptor is not None and isinstance(nargs.get(name), TensorDescriptor):
            nargs[name].block_shape = _box(len(nargs[name].shape), nargs["BLOCK_M"], nargs[width])
    if nargs.get("USE_TMA"):  # key-row tiles: the forward's and the dQ kernel's K, V
        for name, width in (("K", "HEADDIM"), ("V", "HEADDIM_V")):
            nargs[name].block_shape = _box(len(nargs[name].shape), nargs["BLOCK_N"], nargs[width])
    if nargs.get("DQ_TMA"):  # one part's columns when the atomic backward is split over the head dim
        nargs["dQacc"].block_shape = [1, nargs["BLOCK_M"], nargs["HEADDIM"] // nargs.get("SPLIT_D", 1)]


def _alloc(shape, dtype, device) -> torch.Tensor:
    if POISON_OUTPUTS:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _strides(x: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, seq, head) strides; batch stride 0 for packed tensors."""
    return (0, x.stride(0), x.stride(1)) if varlen else (x.stride(0), x.stride(1), x.stride(2))


def _row_stat_strides(stat: torch.Tensor, varlen: bool) -> tuple[int, int]:
    """(batch, head) strides of lse-shaped tensors (seq stride is 1: they are made contiguous)."""
    return (0, stat.stride(0)) if varlen else (stat.stride(0), stat.stride(1))


class _Shape:
    """Everything the launchers derive from one call's tensors."""

    def __init__(self, q, k, v, params: AttnParams, varlen: Varlen | None):
        self.varlen = varlen is not None
        if self.varlen:
            self.batch = varlen.batch
            self.seqlen_q, self.seqlen_k = varlen.max_seqlen_q, varlen.max_seqlen_k
            self.cu_q, self.cu_k = varlen.cu_seqlens_q, varlen.cu_seqlens_k
        else:
            self.batch, self.seqlen_q, self.seqlen_k = q.shape[0], q.shape[1], k.shape[1]
            self.cu_q = self.cu_k = q  # unused placeholders (IS_VARLEN=False never reads them)
        self.nheads, self.nheads_kv = q.shape[-2], k.shape[-2]
        self.headdim, self.headdim_v = q.shape[-1], v.shape[-1]
        self.block_d = max(16, next_power_of_2(self.headdim))
        self.block_dv = max(16, next_power_of_2(self.headdim_v))
        window = params.window
        self.has_left, self.has_right = window.left >= 0, window.right >= 0
        self.causal = window.right == 0
        self.mask_kind = 0 if window.unmasked else 1 if window.causal and not window.local else 2
        self.softcap = params.softcap
        # 16-bit inputs: scores in log2 units (one FMA and one exp2 per score; the backward converts lse once per
        # row). fp32 keeps natural units, whose rounding stays under the fp32 reference's (kernels._scores).
        self.log2_scores = q.dtype != torch.float32
        unit = LOG2E if self.log2_scores else 1.0
        if self.softcap > 0:  # scores = softcap * tanh(scale * qk / softcap)
            self.qk_scale, self.softcap2 = params.softmax_scale / params.softcap, params.softcap * unit
        else:
            self.qk_scale, self.softcap2 = params.softmax_scale * unit, 1.0
        self.softmax_scale = params.softmax_scale
        self.deterministic = params.deterministic
        self.window_left, self.window_right = window.kernel_sides(self.seqlen_q, self.seqlen_k)
        self.dot_precision = "ieee" if q.dtype == torch.float32 else "tf32"
        self.elem_bytes = q.element_size()
        self.device = q.device

    def constexprs(self) -> dict:
        return dict(
            HEADDIM=self.headdim, HEADDIM_V=self.headdim_v, BLOCK_D=self.block_d, BLOCK_DV=self.block_dv,
            IS_VARLEN=self.varlen, HAS_LEFT=self.has_left, HAS_RIGHT=self.has_right,
            HAS_SOFTCAP=K.softcap_mode(self.softcap), DOT_PRECISION=self.dot_precision, LOG2_SCORES=self.log2_scores,
        )

    def scalars(self) -> tuple:
        return (self.seqlen_q, self.seqlen_k, self.nheads // self.nheads_kv)

    @property
    def max_seqlen(self) -> int:
        """The longer of the two sequences: the tile tables' bucket."""
        return max(self.seqlen_q, self.seqlen_k)

    def autotune_keys(self) -> tuple[int, int]:
        return self.mask_kind, configs.seq_bucket(self.max_seqlen)


_device_limits: dict[int, tuple[int, int, int]] = {}


def _device(device: torch.device) -> tuple[int, int, int]:
    """(major compute capability, SM count, shared memory per block) of a CUDA device, looked up once: the
    per-call property queries were a visible share of the launch's host time at seqlen 512."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _device_limits:
        props = torch.cuda.get_device_properties(index)
        smem = getattr(props, "shared_memory_per_block_optin", 0) or 99 * 1024
        _device_limits[index] = (props.major, props.multi_processor_count, smem)
    return _device_limits[index]


_autotuned: dict[tuple, object] = {}


def _launcher(kind: str, kernel, shape: _Shape, tma: bool = False, pointers: bool = False):
    """The tile to launch with (configs.tile_for: pinned per shape, reproducible), or with FA3NN_TRITON_AUTOTUNE=1
    the autotuner over configs.autotune_candidates. deterministic=True never autotunes: another process may pick
    another tile, and a different tile rounds differently. `pointers`: the call loads by pointers where the table's
    tile was measured through descriptors (configs.POINTER_FALLBACK)."""
    if shape.device.type != "cuda":  # CPU tensors: Triton's interpreter
        return configs.OVERRIDES.get(kind, configs.INTERPRETER[kind])
    _, num_sms, smem_limit = _device(shape.device)
    max_seqlen = shape.max_seqlen
    if configs.autotune_enabled() and not shape.deterministic and kind not in configs.OVERRIDES:
        tiles = configs.autotune_candidates(kind, shape.block_d, shape.block_dv, shape.causal, max_seqlen,
                                            shape.elem_bytes, smem_limit, tma, pointers)
        if len(tiles) > 1:
            return _autotuner(kind, kernel, tiles)
    if kind in configs.KEY_BLOCK_KINDS:  # one program per key block of each K/V head (and head-dim part)
        parts = configs.DKDV_SPLIT_PARTS if kind in configs.SPLIT_KINDS else 1
        units, grid_seqlen = shape.batch * shape.nheads_kv * parts, shape.seqlen_k
    else:  # one program per query block of each head
        units, grid_seqlen = shape.batch * shape.nheads, shape.seqlen_q
    return configs.tile_for(kind, shape.block_d, shape.block_dv, shape.causal, max_seqlen, shape.elem_bytes, units,
                            grid_seqlen, num_sms, smem_limit, tma, pointers)


def _autotuner(kind: str, kernel, tiles: list[configs.Tile]):
    key = (kind, tuple(tiles))
    if key not in _autotuned:
        hook = _set_tma_block_shapes  # a no-op for launches without descriptors
        candidates = [
            triton.Config({"BLOCK_M": t.block_m, "BLOCK_N": t.block_n}, num_warps=t.num_warps, num_stages=t.num_stages,
                          pre_hook=hook)
            for t in tiles
        ]
        # the atomic dQ accumulator must start from zero for every timed trial
        reset = ["dQacc"] if kind in configs.ATOMIC_DQ_KINDS else None
        _autotuned[key] = triton.autotune(candidates, key=["BLOCK_D", "MASK_KIND", "SEQ_BUCKET"],
                                          reset_to_zero=reset)(kernel)
    return _autotuned[key]


def _launch(kind: str, kernel, shape: _Shape, grid_of, args: tuple, pointers: bool = False, **constexprs):
    """Run `kernel` with `args`; grid_of(block_m, block_n) gives the grid for a tile (`pointers` as _launcher)."""
    # the forward's operands through (rows, heads * dim) descriptors: Triton keeps num_stages - 1 K/V buffers there
    # (configs.shared_memory_bytes); through the batched (batch, seqlen, heads * dim) ones (USE_TMA == 2) it keeps
    # num_stages, as by pointers (offline, Triton 3.6: d256 128x64/8w/3 192 KB -> 257 KB, past the H200's 227), and
    # so do the dQ kernel's descriptor loads (161 KB at d128 128x64/3)
    chosen = _launcher(kind, kernel, shape, tma=kind == "fwd" and constexprs.get("USE_TMA") == 1, pointers=pointers)
    if isinstance(chosen, configs.Tile):
        grid = grid_of(chosen.block_m, chosen.block_n)
        if any(constexprs.get(name) for name in ("USE_TMA", "DQ_TMA", "QDO_TMA")):  # only descriptor launches pay
            _set_tma_block_shapes({**dict(zip(kernel.arg_names, args)), **constexprs, "BLOCK_M": chosen.block_m,
                                   "BLOCK_N": chosen.block_n})
        kernel[grid](*args, **constexprs, BLOCK_M=chosen.block_m, BLOCK_N=chosen.block_n,
                     num_warps=chosen.num_warps, num_stages=chosen.num_stages)
    else:
        chosen[lambda meta: grid_of(meta["BLOCK_M"], meta["BLOCK_N"])](*args, **constexprs)


def forward(q, k, v, params: AttnParams, varlen: Varlen | None, sinks: torch.Tensor | None = None):
    """(out, lse); `sinks` (nheads,): gpt-oss's sink logits, in the kernel's epilogue (fa3nn.sinks)."""
    q, k, v = (_last_dim_contiguous(x) for x in (q, k, v))
    shape = _Shape(q, k, v, params, varlen)
    out = _alloc((*q.shape[:-1], shape.headdim_v), q.dtype, q.device)
    lse_shape = (shape.nheads, q.shape[0]) if shape.varlen else (shape.batch, shape.nheads, shape.seqlen_q)
    lse = _alloc(lse_shape, saved_lse_dtype(q.dtype), q.device)
    views = _tma_views(q, k, v, shape=shape,
                       batched=tma_batched("fwd", shape.block_d, shape.causal, shape.max_seqlen))
    if views is not None:
        sources = tuple(_descriptor(x, n) for x, n in zip(views, (shape.nheads, shape.nheads_kv, shape.nheads_kv)))
    else:
        sources = (q, k, v)
    if sinks is not None:
        sinks = sinks.detach().to(torch.float32).contiguous()
    args = (
        *sources, out, lse, lse if sinks is None else sinks, shape.cu_q, shape.cu_k,
        *_strides(q, shape.varlen), *_strides(k, shape.varlen), *_strides(v, shape.varlen),
        *_strides(out, shape.varlen), *_row_stat_strides(lse, shape.varlen),
        *shape.scalars(), shape.qk_scale, shape.softcap2, shape.window_left, shape.window_right,
        *shape.autotune_keys(),
    )
    _launch("fwd", K._fwd_kernel, shape, lambda bm, bn: (triton.cdiv(shape.seqlen_q, bm), shape.nheads, shape.batch),
            args, pointers=configs.lacks_measured_views("fwd", shape.block_d, True, _views_rank(views)),
            **shape.constexprs(), USE_TMA=_tma_mode(views), HAS_SINKS=sinks is not None)
    return out, lse


def backward(dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None, sinks=None):
    """(dq, dk, dv); with `sinks` (the forward's, fa3nn.sinks) also dsinks from the delta kernel's
    rowsum(dout * out) - dlse (laid out like lse): sum over rows of exp(sink - lse) * (dlse - rowsum), no further pass
    over dout and out."""
    *grads, delta = _backward(dout, q, k, v, out, lse, dlse, params, varlen)
    if sinks is None:
        return tuple(grads)
    return (*grads, sinks_gradient_of_delta(sinks, lse, delta))


def _backward(dout, q, k, v, out, lse, dlse, params: AttnParams, varlen: Varlen | None):
    """backward's (dq, dk, dv) and the delta the kernels read."""
    q, k, v, out, dout = (_last_dim_contiguous(x) for x in (q, k, v, out, dout))
    shape = _Shape(q, k, v, params, varlen)
    lse = lse.contiguous()
    delta = torch.empty_like(lse, dtype=torch.float32)
    stat_strides = _row_stat_strides(lse, shape.varlen)
    if dlse is not None:
        dlse = dlse.contiguous()

    def launch_delta():
        delta_rows = 64
        K._bwd_delta_kernel[(triton.cdiv(shape.seqlen_q, delta_rows), shape.nheads, shape.batch)](
            out, dout, dlse if dlse is not None else delta, delta, shape.cu_q,
            *_strides(out, shape.varlen), *_strides(dout, shape.varlen), *stat_strides, shape.seqlen_q,
            HEADDIM_V=shape.headdim_v, BLOCK_DV=shape.block_dv, IS_VARLEN=shape.varlen, HAS_DLSE=dlse is not None,
            BLOCK_M=delta_rows,
        )

    dk = _alloc(k.shape, k.dtype, k.device)
    dv = _alloc(v.shape, v.dtype, v.device)
    common = (
        *shape.scalars(), shape.softmax_scale, shape.qk_scale, shape.softcap2, shape.window_left,
        shape.window_right, *shape.autotune_keys(),
    )
    qkv_do_strides = (
        *_strides(q, shape.varlen), *_strides(k, shape.varlen), *_strides(v, shape.varlen),
        *_strides(dout, shape.varlen),
    )
    # Default: a separate dQ kernel (7 matmuls, no atomics, bitwise repeatable). FA3NN_TRITON_ATOMIC_DQ=1 instead
    # adds dQ by fp32 atomics from the dK/dV kernel (5 matmuls), unless deterministic=True. On the H200 (Triton
    # 3.6) the per-element atomics measured slower, up to 2x at causal (benchmarks/NOTES.md), hence opt-in; on
    # sm_90 dense calls add each tile with one TMA reduce-add instead (_dq_reduce_target).
    atomic_dq = ATOMIC_DQ and not params.deterministic
    dq_acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device) if atomic_dq else dk
    dq_target = _dq_reduce_target(dq_acc, shape) if atomic_dq else None
    max_seqlen = shape.max_seqlen
    batched = tma_batched("bwd", shape.block_d, shape.causal, max_seqlen)

    def launch_key_blocks():
        for kind in key_block_kinds(shape.block_d, shape.block_dv, atomic_dq, shape.causal, max_seqlen):
            split = configs.DKDV_SPLIT_PARTS if kind in configs.SPLIT_KINDS else 1
            wants_tma = split == 1 and tma_loads(kind, shape.block_d, shape.causal, max_seqlen)
            qdo_views = _tma_views(q, dout, shape=shape, batched=batched) if wants_tma else None
            q_src, do_src = (q, dout) if qdo_views is None else tuple(_descriptor(x, shape.nheads)
                                                                       for x in qdo_views)
            # tiles measured through descriptors, which this call lacks (not available, or switched off)
            pointers = configs.lacks_measured_views(kind, shape.block_d,
                                                    configs.tma_loads(kind, shape.block_d, shape.causal, max_seqlen),
                                                    _views_rank(qdo_views))
            adds_dq = kind in configs.ATOMIC_DQ_KINDS  # not the output split's dV kernel
            _launch(
                kind, K._bwd_dkdv_kernel, shape,
                lambda bm, bn, split=split: (triton.cdiv(shape.seqlen_k, bn) * split, shape.nheads_kv, shape.batch),
                (q_src, k, v, do_src, lse, delta, dk, dv, dq_target if adds_dq and dq_target is not None else dq_acc,
                 shape.cu_q, shape.cu_k, *qkv_do_strides, *_strides(dk, shape.varlen), *_strides(dv, shape.varlen),
                 *_strides(dq_acc, shape.varlen), *stat_strides, *common),
                **shape.constexprs(), ATOMIC_DQ=adds_dq,
                UNMASKED_ROW_STATS=UNMASKED_ROW_STATS, DQ_TMA=adds_dq and dq_target is not None, SPLIT_D=split,
                QDO_TMA=_tma_mode(qdo_views),
                QUERY_MAJOR=dkdv_query_major(kind, shape.block_d, shape.causal, max_seqlen, pointers),
                WITH_DK=kind != "dv", WITH_DV=kind not in ("dk", "dk_dq"), pointers=pointers,
            )

    if atomic_dq:  # the kernel adds unscaled dS·K
        launch_delta()
        launch_key_blocks()
        return dq_acc.mul_(shape.softmax_scale).to(q.dtype), dk, dv, delta
    dq = _alloc(q.shape, q.dtype, q.device)
    measured_tma = configs.tma_loads("dq", shape.block_d, shape.causal, max_seqlen)
    wants_tma = tma_loads("dq", shape.block_d, shape.causal, max_seqlen)
    views = _tma_views(k, v, shape=shape, batched=batched) if wants_tma else None
    kv = (k, v) if views is None else tuple(_descriptor(x, shape.nheads_kv) for x in views)

    def launch_dq():
        _launch(
            "dq", K._bwd_dq_kernel, shape,
            lambda bm, bn: (triton.cdiv(shape.seqlen_q, bm), shape.nheads, shape.batch),
            (q, *kv, dout, lse, delta, dq, shape.cu_q, shape.cu_k, *qkv_do_strides, *_strides(dq, shape.varlen),
             *stat_strides, *common),
            # its tile measured through descriptors (for d256 the batched ones), which this call lacks
            pointers=configs.lacks_measured_views("dq", shape.block_d, measured_tma, _views_rank(views)),
            **shape.constexprs(), USE_TMA=_tma_mode(views),
        )

    if not (BWD_STREAMS and q.is_cuda):
        launch_delta()
        launch_key_blocks()
        launch_dq()
        return dq, dk, dv, delta
    # fork after the outputs exist, join before returning: the caller's stream sees every output written, and
    # nothing the side stream reads is freed before it (the join orders the caller's later frees after it)
    # The delta kernel stays first on the caller's stream: run beside the output split's dV kernel instead (which
    # never reads delta), it measured +0.5% at d256 512-1k and -1% at 16k causal (s16e-h200-20261203-0157), noise.
    main, side = torch.cuda.current_stream(q.device), _side_stream(q.device)
    launch_delta()
    side.wait_stream(main)
    with torch.cuda.stream(side):
        launch_dq()
    launch_key_blocks()
    main.wait_stream(side)
    return dq, dk, dv, delta
