"""Shared checks for the Triton backend tests (interpreter and GPU): run fa3nn with backend='triton' and hold out,
lse, dq, dk, dv to FlashAttention-3's error-ratio rule against attention_ref (fp32/fp64 `ref`, own-precision `pt`).
"""

from __future__ import annotations

import pytest
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


# ---------------------------------------------------------------------------------------------------------------
# The tile table (fa3nn.backends.triton.configs): pure Python, no Triton needed.
# ---------------------------------------------------------------------------------------------------------------

H200_SMS, H200_SMEM, A100_SMEM = 132, 232448, 166912


def test_seq_buckets_split_at_1k_and_4k():
    from fa3nn.backends.triton.configs import BUCKET_SEQLENS, seq_bucket

    assert [seq_bucket(n) for n in (1, 512, 1024, 1025, 2048, 4096, 4097, 16384)] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert [seq_bucket(n) for n in BUCKET_SEQLENS] == [0, 1, 2]  # one length in each bucket


def test_pinned_tiles_are_the_measured_winners():
    from fa3nn.backends.triton import configs
    from fa3nn.backends.triton.configs import Tile, pinned

    # head dim 128: the forward's 64x64 / 4 warps at every length, causal or not (NOTES.md: 502 vs 428 TFLOP/s)
    for seqlen in (512, 2048, 16384):
        for causal in (False, True):
            assert pinned("fwd", 128, causal, seqlen) == Tile(64, 64, 4, 3)
            if seqlen > 1024 or not causal:
                assert pinned("dq", 128, causal, seqlen) == Tile(128, 64, 8, 3)
    # dK/dV at d128, causal and not: key-major 64x64/4w/2 with Q / dO through descriptors (configs.TMA_LOADS;
    # NOTES "2026-12-02 fourteenth": 413 vs 382 TFLOP/s at 8192 non-causal, 392 vs 361 causal, 345 vs 325 at 1024)
    for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
        for causal in (False, True):
            assert pinned("dkdv", 128, causal, seqlen) == Tile(64, 64, 4, 2)
            assert configs.tma_loads("dkdv", 128, causal, seqlen) and not configs.query_major(128, causal, seqlen)
    assert not configs.tma_loads("dkdv", 64, False, 8192) and not configs.tma_loads("dkdv", 256, True, 2048)
    # dQ at d128 causal up to 1k: 64x64/4w/2 with K / V through descriptors (NOTES "2026-12-02 fifteenth": whole
    # backward 190 vs 182 TFLOP/s at 512), 128x64/8w/3 by pointers
    assert pinned("dq", 128, True, 512) == Tile(64, 64, 4, 2) and configs.tma_loads("dq", 128, True, 1024)
    assert pinned("dq", 128, True, 1024, pointers=True) == Tile(128, 64, 8, 3)
    assert not configs.tma_loads("dq", 256, True, 1024) and not configs.tma_loads("dq", 64, True, 8192)
    # d256 (NOTES "2026-12-02 sixteenth"): forward 64x128/4w/1 (+20..+25% non-causal, +6..+12% causal), dQ
    # 64x64/4w/2 (whole backward up to +7.8%), both through the batched views; without them the earlier tiles
    for causal in (False, True):
        assert pinned("fwd", 256, causal, 512) == pinned("fwd", 256, causal, 16384) == Tile(64, 128, 4, 1)
        assert configs.tma_batched("fwd", 256, causal, 512) and configs.tma_batched("bwd", 256, causal, 2048)
        assert pinned("fwd", 256, causal, 2048, pointers=True) == Tile(128, 64, 8, 3)
        assert pinned("dq", 256, causal, 8192) == Tile(64, 64, 4, 2) and configs.tma_loads("dq", 256, causal, 2048)
        assert pinned("dq", 256, causal, 8192, pointers=True) == Tile(128, 32, 8, 2)
    assert pinned("dq", 256, True, 1024) == Tile(128, 32, 8, 2) and not configs.tma_loads("dq", 256, True, 1024)
    # d256 dV up to 1k: 64x64/4w/1 through the batched descriptors (+1.5..+4.1%, NOTES "sixteenth"), else 8 warps
    assert pinned("dv", 256, True, 1024) == Tile(64, 64, 4, 1) and configs.tma_loads("dv", 256, False, 512)
    assert pinned("dv", 256, True, 1024, pointers=True) == Tile(64, 128, 8, 1)
    assert not configs.tma_loads("dv", 256, False, 2048) and configs.lacks_measured_views("dv", 256, True, 2)
    # the batched-only tiles fall back through the (rows, heads * dim) views; others only by pointers
    lacks = configs.lacks_measured_views
    assert lacks("fwd", 256, True, 2) and lacks("dq", 256, True, 2) and lacks("fwd", 128, True, None)
    assert not lacks("fwd", 256, True, 3) and not lacks("dq", 128, True, 2) and not lacks("dq", 256, False, 2)
    # ... and by pointers (no descriptors for the call: configs.POINTER_FALLBACK), the pointer path's tiles as
    # measured before (NOTES "2026-12-01 fourth", "2026-12-02 twelfth"); other kinds and head dims unaffected
    assert pinned("dkdv", 128, False, 2048, pointers=True) == Tile(32, 64, 4, 3)
    assert pinned("dkdv", 128, False, 8192, pointers=True) == Tile(64, 128, 8, 1)
    assert pinned("dkdv", 128, True, 2048, pointers=True) == Tile(64, 64, 4, 2)
    assert pinned("dkdv", 128, True, 8192, pointers=True) == Tile(64, 128, 8, 2)
    assert pinned("dkdv", 64, True, 8192, pointers=True) == pinned("dkdv", 64, True, 8192)
    assert pinned("dq", 128, True, 8192, pointers=True) == pinned("dq", 128, True, 8192)
    # query-major scores (configs.QUERY_MAJOR; NOTES "2026-12-02 twelfth"): d64 64x64/4w/3 (+7..+12% on the whole
    # backward; /2 stages causal up to 1k)
    assert pinned("dkdv", 64, False, 8192) == pinned("dkdv", 64, True, 2048) == Tile(64, 64, 4, 3)
    assert pinned("dkdv", 64, True, 1024) == Tile(64, 64, 4, 2) and configs.query_major(64, True, 1024)
    # up to 1k, 4-warp tiles (H200 sweep 2026-12-01): d64 forward +45% non-causal / +80% causal at 512, dK/dV
    # 32x64/4w +9-10% at d128 non-causal
    assert pinned("fwd", 64, False, 1024) == Tile(128, 64, 4, 3)
    assert pinned("fwd", 64, True, 512) == Tile(64, 64, 4, 3)
    # tiles change with the sequence bucket
    assert pinned("fwd", 64, False, 2048) == Tile(64, 64, 4, 3)
    assert pinned("fwd", 64, False, 8192) == Tile(128, 64, 4, 3)
    assert pinned("fwd", 64, True, 8192) == Tile(64, 64, 4, 3)  # 424 vs 334 for 128x128/8w (2026-12-01)
    assert pinned("dkdv", 256, True, 16384) == Tile(32, 64, 8, 2)  # the one-program kernel (split off)
    assert pinned("dkdv_split", 256, False, 1024) == pinned("dkdv_split", 256, True, 4096) == Tile(32, 128, 8, 2)
    assert pinned("dkdv_split", 256, False, 4096) == Tile(64, 128, 8, 1)  # 226.7 vs 209.7 at 2048 (2026-12-02)
    assert pinned("dkdv_split", 256, False, 4097) == Tile(64, 128, 8, 1)
    # d256 output split (the default there; NOTES "2026-12-02 thirteenth"): dV 64x128/8w/1, dK 64x128/8w/1
    # non-causal (263 / 264 TFLOP/s at 2048 / 8192) and 32x128/8w/2 causal (221 / 277)
    assert pinned("dv", 256, False, 1024, pointers=True) == pinned("dv", 256, True, 16384) == Tile(64, 128, 8, 1)
    assert pinned("dv", 256, False, 2048) == Tile(64, 128, 8, 2)  # 278 vs 264 TFLOP/s (2026-12-02, next14)
    assert pinned("dk", 256, False, 8192) == Tile(64, 128, 8, 1)
    assert pinned("dk", 256, True, 512) == pinned("dk", 256, True, 8192) == Tile(32, 128, 8, 2)
    # d256 forward: 64x128/4w/1 at every length through the batched views (2048: 602 vs 482 TFLOP/s for
    # 128x64/8w/3, which serves calls without them; NOTES "2026-12-02 sixteenth")
    assert pinned("fwd", 256, False, 4097) == pinned("fwd", 256, True, 512) == Tile(64, 128, 4, 1)
    assert pinned("fwd", 256, False, 4097, pointers=True) == Tile(128, 64, 8, 3)
    # padded head dims share their power of two's entry; 32 (unmeasured) takes 64's
    assert pinned("fwd", 16, False, 100) == pinned("fwd", 32, False, 100) == pinned("fwd", 64, False, 100)


def test_fp8_tiles_are_the_measured_winners():
    """fa3nn.backends.triton.fp8_launch.FP8_FWD per (head dim, masked): the defaults measured on the H200 (NOTES
    "2026-12-03 seventeenth session", s17c / s18a / s18b), and the filter that keeps key blocks inside one V scale
    tile."""
    from fa3nn.backends.triton.configs import Tile
    from fa3nn.backends.triton.fp8_launch import FP8_FWD, fp8_tiles

    assert set(FP8_FWD) == {(d, masked) for d in (64, 128, 256) for masked in (False, True)}
    # d128: 64x128/4w/3 non-causal (585 vs 529 TFLOP/s at 16k), 128x128/8w/3 masked (503 vs 410 for 64x128 at 16k)
    assert fp8_tiles(128, 256, 16384, False)[0] == Tile(64, 128, 4, 3)
    assert fp8_tiles(128, 256, 16384, True)[0] == Tile(128, 128, 8, 3)
    assert fp8_tiles(64, 256, 2048, False)[0] == Tile(128, 64, 4, 3)
    assert fp8_tiles(256, 256, 2048, True)[0] == Tile(128, 64, 8, 2)
    # K/V scale tiles of 64 rows: only 64-key (or smaller) blocks; one tile per sequence: any block
    assert all(t.block_n <= 64 for t in fp8_tiles(128, 64, 16384, False))
    assert fp8_tiles(128, 64, 16384, False)[0] == Tile(128, 64, 8, 3)
    assert fp8_tiles(128, 4096, 4096, False)[0] == Tile(64, 128, 4, 3)
    # no table tile fits 48-row scale tiles: the fallback keeps BLOCK_N dividing block_k
    assert fp8_tiles(128, 48, 16384, True) == [Tile(128, 16, 8, 2)]


def test_every_pinned_tile_fits_hopper_shared_memory():
    from fa3nn.backends.triton.configs import PINNED, shared_memory_bytes

    for kind, table in PINNED.items():
        for (block_d, causal), tiles in table.items():
            assert len(tiles) == 3, (kind, block_d, causal)
            for tile in tiles:
                # the forward streams K/V through tensor descriptors on Hopper (Triton keeps num_stages - 1 buffers)
                tma = kind == "fwd"
                assert shared_memory_bytes(kind, tile, block_d, block_d, 2, tma) <= H200_SMEM, (kind, block_d, tile)


def test_candidate_tables_replace_only_their_entries(monkeypatch):
    """FA3NN_TRITON_TILES / configs.TILE_TABLE: a candidate table replaces its own entries, PINNED serves the rest,
    an unknown name is refused with the choices, and every candidate tile fits the H200's shared memory."""
    from fa3nn.backends.triton import configs

    assert configs.TILE_TABLE == "pinned"  # the default path is the measured table
    monkeypatch.setattr(configs, "TILE_TABLE", "least-spill")
    assert configs.pinned("dkdv", 128, True, 8192) == configs.Tile(16, 128, 8, 2)
    assert configs.pinned("dkdv", 128, True, 8192) != configs.PINNED["dkdv"][(128, True)][2]
    assert configs.pinned("dq", 128, True, 8192) == configs.PINNED["dq"][(128, True)][2]
    assert configs.pinned("dq", 64, False, 8192) == configs.PINNED["dq"][(64, False)][2]
    assert configs.pinned("fwd", 256, False, 8192) == configs.PINNED["fwd"][(256, False)][2]
    for name, table in configs.CANDIDATE_TABLES.items():
        for kind, entries in table.items():
            for (block_d, causal), tiles in entries.items():
                assert len(tiles) == 3, (name, kind, block_d, causal)
                for tile in tiles:
                    assert configs.shared_memory_bytes(kind, tile, block_d, block_d, 2) <= H200_SMEM, (name, tile)
    monkeypatch.setattr(configs, "TILE_TABLE", "fastest")
    with pytest.raises(ValueError, match="least-spill"):
        configs.pinned("dkdv", 128, True, 8192)


def test_short_grids_get_smaller_tiles_until_one_wave():
    from fa3nn.backends.triton.configs import Tile, fill_sms

    d64_fwd = Tile(128, 128, 8, 3)
    # batch 1 x 8 heads x 512 rows: 32 programs of 128 rows, 64 of 64 rows (both under 132 SMs) -> 64 rows
    assert fill_sms("fwd", d64_fwd, 8, 512, H200_SMS) == Tile(64, 128, 8, 3)
    # 20 units: 80 programs of 128 rows, but 160 of 64 would need a second wave -> unchanged
    assert fill_sms("fwd", d64_fwd, 20, 512, H200_SMS) == d64_fwd
    # the benchmark's seqlen 512 (batch 32 x 16 heads) has 2048 programs: unchanged
    assert fill_sms("fwd", d64_fwd, 512, 512, H200_SMS) == d64_fwd
    # dK/dV programs own key rows: BLOCK_N shrinks, BLOCK_M stays
    assert fill_sms("dkdv", Tile(32, 128, 8, 3), 4, 1000, H200_SMS) == Tile(32, 64, 8, 3)
    # never below 64 rows, however small the grid
    assert fill_sms("dq", Tile(128, 64, 8, 3), 1, 64, H200_SMS) == Tile(64, 64, 8, 3)
    assert fill_sms("fwd", Tile(64, 64, 4, 3), 1, 64, H200_SMS) == Tile(64, 64, 4, 3)


def test_tiles_shrink_to_the_shared_memory():
    from fa3nn.backends.triton.configs import Tile, fit_shared_memory, shared_memory_bytes, tile_for

    # (64 + 3 stages x 2 x 64) rows x 128 dims x 2 bytes = 114688 bytes; a 64 KiB device gets one stage: 49152
    assert shared_memory_bytes("fwd", Tile(64, 64, 4, 3), 128, 128, 2) == 114688
    assert fit_shared_memory("fwd", Tile(64, 64, 4, 3), 128, 128, 2, 65536) == Tile(64, 64, 4, 1)
    # d256 (128, 32, 8, 2) needs 131072 bytes; one stage 98304, 16 key rows 81920, then 64 query rows 49152
    assert fit_shared_memory("fwd", Tile(128, 32, 8, 2), 256, 256, 2, 65536) == Tile(64, 16, 8, 1)
    # through descriptors d256 128x64 keeps 3 stages on Hopper (192 KB, Triton 3.6 offline); without, 2 (192 KB)
    assert shared_memory_bytes("fwd", Tile(128, 64, 8, 3), 256, 256, 2, tma=True) == 196608
    assert fit_shared_memory("fwd", Tile(128, 64, 8, 3), 256, 256, 2, H200_SMEM, tma=True) == Tile(128, 64, 8, 3)
    assert fit_shared_memory("fwd", Tile(128, 64, 8, 3), 256, 256, 2, H200_SMEM) == Tile(128, 64, 8, 2)
    # an A100 keeps every pinned tile of the benchmark's head dims
    for block_d in (64, 128, 256):
        for seqlen in (512, 2048, 16384):
            tile = tile_for("fwd", block_d, block_d, True, seqlen, 2, 4096, seqlen, 108, A100_SMEM)
            assert shared_memory_bytes("fwd", tile, block_d, block_d, 2) <= A100_SMEM


def test_tile_for_is_the_pinned_tile_unless_overridden(monkeypatch):
    from fa3nn.backends.triton import configs

    bench_shape = dict(elem_bytes=2, grid_units=32 * 16, grid_seqlen=2048, num_sms=H200_SMS, smem_limit=H200_SMEM)
    assert configs.tile_for("fwd", 128, 128, False, 2048, **bench_shape) == configs.Tile(64, 64, 4, 3)
    monkeypatch.setitem(configs.OVERRIDES, "fwd", configs.Tile(16, 16, 1, 1))
    assert configs.tile_for("fwd", 128, 128, False, 2048, **bench_shape) == configs.Tile(16, 16, 1, 1)
    assert configs.tile_for("dq", 128, 128, False, 2048, **bench_shape) == configs.Tile(128, 64, 8, 3)


def test_autotuning_is_opt_in(monkeypatch):
    from fa3nn.backends.triton import configs

    monkeypatch.delenv("FA3NN_TRITON_AUTOTUNE", raising=False)
    assert not configs.autotune_enabled()
    monkeypatch.setenv("FA3NN_TRITON_AUTOTUNE", "1")
    assert configs.autotune_enabled()
    candidates = configs.autotune_candidates("fwd", 256, 256, True, 8192, 2, H200_SMEM, tma=True)
    # pinned first, no repeats
    assert candidates == [configs.Tile(64, 128, 4, 1), configs.Tile(128, 64, 8, 3), configs.Tile(128, 64, 8, 2),
                          configs.Tile(128, 32, 8, 2), configs.Tile(64, 64, 8, 2)]
    # without descriptors the 3-stage tile needs 256 KB and is dropped
    assert configs.Tile(128, 64, 8, 3) not in configs.autotune_candidates("fwd", 256, 256, True, 8192, 2, H200_SMEM)


def test_launcher_sizes_each_grid_by_its_own_heads(monkeypatch):
    """launch._launcher on a (faked) H200: dK/dV's grid counts K/V heads, the forward's and dQ's query heads; and
    deterministic=True takes the pinned tile even with autotuning opted in."""
    pytest.importorskip("triton")
    from fa3nn.backends.base import AttnParams
    from fa3nn.backends.triton import configs, launch
    from fa3nn.masks import Window

    monkeypatch.setattr(launch, "_device", lambda device: (9, H200_SMS, H200_SMEM))
    monkeypatch.setenv("FA3NN_TRITON_AUTOTUNE", "1")
    q = torch.empty(1, 8192, 2, 64)  # GQA, batch 1: 2 query heads, 1 K/V head
    k = v = torch.empty(1, 8192, 1, 64)
    shape = launch._Shape(q, k, v, AttnParams(0.125, Window.from_args(False, (-1, -1)), 0.0, True), None)
    shape.device = torch.device("cuda", 0)
    # forward: 2 heads x 64 blocks of 128 rows = 128 programs; 256 of 64 rows would need a second wave -> stays
    # (counting the one K/V head would have halved it)
    assert launch._launcher("fwd", None, shape) == configs.Tile(128, 64, 4, 3)
    assert launch._launcher("dq", None, shape) == configs.Tile(64, 64, 4, 3)  # stays at its 64 rows
    # dK/dV at head dim 128 (d64's tile has 64 keys already): one K/V head, 64 blocks of 128 keys -> 128 blocks of
    # 64 (counting 2 query heads: 256 > 132, no halving)
    q = torch.empty(1, 8192, 2, 128)
    k = v = torch.empty(1, 8192, 1, 128)
    shape = launch._Shape(q, k, v, AttnParams(0.125, Window.from_args(False, (-1, -1)), 0.0, True), None)
    shape.device = torch.device("cuda", 0)
    monkeypatch.setitem(configs.PINNED["dkdv"], (128, False), (configs.Tile(64, 128, 8, 1),) * 3)  # 128 keys
    assert launch._launcher("dkdv", None, shape) == configs.Tile(64, 64, 8, 1)


def test_split_dkdv_grid_counts_both_parts(monkeypatch):
    """The split dK/dV kernel runs two programs per key block: fill_sms must count both, or it halves a tile whose
    grid already fills the GPU. 5 K/V heads x 8 blocks of 128 keys x 2 parts = 80 programs; halving to 64 keys
    would give 160 > 132 SMs, so the pinned 128 keys stay (the unsplit kernel's 40 -> 80 programs does halve)."""
    pytest.importorskip("triton")
    from fa3nn.backends.base import AttnParams
    from fa3nn.backends.triton import configs, launch
    from fa3nn.masks import Window

    monkeypatch.setattr(launch, "_device", lambda device: (9, H200_SMS, H200_SMEM))
    monkeypatch.delenv("FA3NN_TRITON_AUTOTUNE", raising=False)
    q = torch.empty(1, 1024, 5, 256, dtype=torch.bfloat16)
    k = v = torch.empty(1, 1024, 5, 256, dtype=torch.bfloat16)
    shape = launch._Shape(q, k, v, AttnParams(0.0625, Window.from_args(False, (-1, -1)), 0.0, False), None)
    shape.device = torch.device("cuda", 0)
    assert launch.dkdv_kind(shape.block_d, shape.block_dv, atomic_dq=False) == "dkdv_split"
    assert launch._launcher("dkdv_split", None, shape) == configs.Tile(32, 128, 8, 2)
    assert launch._launcher("dkdv", None, shape) == configs.Tile(64, 32, 8, 2)  # 64 x 32 rows: no halving
    assert configs.fill_sms("dkdv", configs.Tile(32, 128, 8, 2), 5, 1024, H200_SMS) == configs.Tile(32, 64, 8, 2)


def _fresh_launch():
    """fa3nn.backends.triton.launch executed afresh as a new module, so its import-time switches read the
    environment as it is now (the imported module, which other tests patch, is left alone)."""
    import importlib.util

    from fa3nn.backends.triton import launch

    spec = importlib.util.spec_from_file_location("fa3nn_launch_fresh", launch.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAUNCH_SWITCHES = {"FA3NN_TRITON_BWD_STREAMS": "BWD_STREAMS", "FA3NN_TRITON_UNMASKED_ROW_STATS": "UNMASKED_ROW_STATS",
                   "FA3NN_TRITON_ATOMIC_DQ": "ATOMIC_DQ", "FA3NN_TRITON_POISON": "POISON_OUTPUTS"}


@pytest.mark.parametrize("env", LAUNCH_SWITCHES)
def test_launch_switches_take_1_or_0_and_refuse_the_rest(env, monkeypatch):
    """Read as `== "1"`, =true turned the default-on switches (BWD_STREAMS, UNMASKED_ROW_STATS) off and did nothing
    for the opt-ins (ATOMIC_DQ)."""
    pytest.importorskip("triton")
    for value, expected in (("1", True), ("0", False)):
        monkeypatch.setenv(env, value)
        assert getattr(_fresh_launch(), LAUNCH_SWITCHES[env]) is expected
    for value in ("true", "yes", "on", "auto"):
        monkeypatch.setenv(env, value)
        with pytest.raises(ValueError, match=f"{env}={value}: use 1 or 0"):
            _fresh_launch()


def test_call_time_switches_refuse_other_values(monkeypatch):
    """FA3NN_TRITON_AUTOTUNE=yes did nothing, FA3NN_TRITON_TMA=on was auto, FA3NN_TRITON_CPU=true was off."""
    pytest.importorskip("triton")
    from fa3nn.backends.triton import _interpreting, configs, launch

    monkeypatch.setenv("FA3NN_TRITON_AUTOTUNE", "yes")
    with pytest.raises(ValueError, match="FA3NN_TRITON_AUTOTUNE=yes: use 1 or 0"):
        configs.autotune_enabled()
    for value, expected in (("1", True), ("0", False), ("auto", None)):
        monkeypatch.setenv("FA3NN_TRITON_TMA", value)
        assert launch._tma_switch() is expected
    monkeypatch.setenv("FA3NN_TRITON_TMA", "on")
    with pytest.raises(ValueError, match=r"FA3NN_TRITON_TMA=on: use auto \(the default\), 1 or 0"):
        launch._tma_switch()
    monkeypatch.setenv("FA3NN_TRITON_CPU", "true")
    with pytest.raises(ValueError, match="FA3NN_TRITON_CPU=true: use 1 or 0"):
        _interpreting()
    monkeypatch.setenv("FA3NN_TRITON_CPU", "1")
    monkeypatch.setenv("TRITON_INTERPRET", "true")  # Triton's own variable, read as Triton reads it
    assert _interpreting()


def test_host_next_power_of_2_is_tritons():
    """fa3nn.backends.triton.configs.next_power_of_2 (the launchers' host-side sizes, without the cost of Triton's
    ConstexprFunction) gives triton.next_power_of_2's value for every size a launcher meets, and past it."""
    import triton

    from fa3nn.backends.triton.configs import next_power_of_2

    for n in [*range(0, 4100), 2**20 - 1, 2**20, 2**20 + 1, 2**31 - 1]:
        assert next_power_of_2(n) == triton.next_power_of_2(n), n
