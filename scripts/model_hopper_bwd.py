"""A float64 model of the index math of the Hopper backward (kernels/hopper/flash_bwd.cuh), checked against the
exact gradients. CPU only, numpy.

What it checks: the per-thread accumulator / A-fragment maps, the transposed-score layout, the mask and which query
blocks a key block visits (first_m_block, bwd_block_needs_mask), the lse_log2 / delta padding of the preprocess, the
dS^T shared-memory swizzle (write_ds) as a 128B-swizzled panel read back row by row, the dQ split (columns for d128,
keys for d64), reduce_dq's and store_rows' addressing, and the bulk-dQ variant's path (stage_dq's swizzled fp32
tile, read back as the dQ writer's TMA reduce-add boxes and added at their coordinates). Every formula is
transcribed from the kernel by hand, so this is a model, not the kernel: it cannot see hardware semantics
(descriptors, wgmma operand majorness, barriers, rounding to 16 bits). It assumes each wgmma computes
acc[m][n] = sum_k A[m][k] B[n][k] for the operands the kernel names. A wrong transcription in either place shows as
a mismatch: changing the swizzle XOR or first_m_block by one makes dQ or all three gradients fail (tried when it was
written); so does an off-by-one in stage_dq's XOR, its float pair offset, or (d64) its per-warpgroup tile. The
overlap variants' deferred dQ (one step late, from the other dS^T buffer, to the previous query block's rows, with a
discarded dQ at step 0 that reads a NaN buffer) runs too: handing off step 0's dQ, or dQ_j-1 to block m_block's
rows, fails it (tried).

    python scripts/model_hopper_bwd.py
"""

from __future__ import annotations

import sys

import numpy as np

BLOCK_M, BLOCK_N = 64, 128
TID = np.arange(128)
WARP, GROUP, QUAD = TID // 32, (TID % 32) // 4, TID % 4


def frag_coords(i: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of accumulator element i for every thread of a warpgroup (HOPPER_PRIMER.md section 2)."""
    row = 16 * WARP + GROUP + 8 * ((i >> 1) & 1)
    col = 8 * (i >> 2) + 2 * QUAD + (i & 1)
    return row, col


def to_regs(acc: np.ndarray, n: int) -> np.ndarray:
    """A 64 x n accumulator as the (128 threads, n / 2) registers a wgmma leaves it in."""
    regs = np.zeros((128, n // 2))
    for i in range(n // 2):
        regs[:, i] = acc[frag_coords(i)]
    return regs


def from_a_fragments(regs: np.ndarray) -> np.ndarray:
    """The 64 x 64 A operand that to_a_fragments' packed pairs a[k][j] = (s[8k+2j], s[8k+2j+1]) present to the RS
    wgmma: element e of pair j in k-step k sits at row r0 + 8 (j & 1), k 16k + 8 (j >> 1) + 2q + e."""
    a = np.zeros((64, 64))
    for k in range(4):
        for j in range(4):
            for e in range(2):
                a[16 * WARP + GROUP + 8 * (j & 1), 16 * k + 8 * (j >> 1) + 2 * QUAD + e] = regs[:, 8 * k + 2 * j + e]
    return a


def write_ds(panel: np.ndarray, regs: np.ndarray, wg: int) -> None:
    """write_ds: fragment a[k][2 hi + half] (columns 16k + 8 hi + 2q, +1 of row r0 + 8 half) to byte
    key * 128 + ((chunk ^ key % 8) << 4) + 4q of the panel (stored here as 16-bit elements)."""
    for half in range(2):
        key = wg * 64 + 16 * WARP + GROUP + 8 * half
        for k in range(4):
            for hi in range(2):
                chunk = 2 * k + hi
                byte = key * 128 + ((chunk ^ (key % 8)) << 4) + 4 * QUAD
                j = 2 * hi + half
                panel[byte // 2] = regs[:, 8 * k + 2 * j]
                panel[byte // 2 + 1] = regs[:, 8 * k + 2 * j + 1]


def read_sw128(panel: np.ndarray, rows: int) -> np.ndarray:
    """A rows x 64 16-bit matrix from a 128B-swizzled panel (the layout TMA SWIZZLE_128B writes and the descriptors
    read): element (r, c) at byte r * 128 + ((c / 8) ^ (r % 8)) * 16 + (c % 8) * 2."""
    r, c = np.arange(rows)[:, None], np.arange(64)[None, :]
    return panel[(r * 128 + (((c // 8) ^ (r % 8)) << 4) + (c % 8) * 2) // 2]


DQ_PANEL_COLS = 32  # BwdConfig::kDQPanelCols: fp32 columns per 128-B row of a bulk-dQ panel
DQ_PANEL_FLOATS = BLOCK_M * DQ_PANEL_COLS


def stage_dq(stage: np.ndarray, regs: np.ndarray, wg: int, d: int) -> None:
    """BwdConsumer::stage_dq: fragment pair (dq[4j + 2 half], +1) of row r0 + 8 half to byte (panel0 + j / 4) * 8192
    + row * 128 + ((chunk ^ row % 8) << 4) + 8 (tid % 2), chunk = 2 (j % 4) + (tid % 4) / 2 (the stage as floats)."""
    split_keys = d < 128
    dq_cols = d if split_keys else d // 2
    tile = wg * (d // DQ_PANEL_COLS) * DQ_PANEL_FLOATS if split_keys else 0
    panel0 = 0 if split_keys else wg * dq_cols // DQ_PANEL_COLS
    for half in range(2):
        row = 16 * WARP + GROUP + 8 * half
        for j in range(dq_cols // 8):
            chunk = 2 * (j % 4) + QUAD // 2
            byte = (panel0 + j // 4) * DQ_PANEL_FLOATS * 4 + row * 128 + ((chunk ^ (row % 8)) << 4) + 8 * (TID % 2)
            np.testing.assert_array_equal(byte % 8, 0)  # float2 stores
            stage[tile + byte // 4] = regs[:, 4 * j + 2 * half]
            stage[tile + byte // 4 + 1] = regs[:, 4 * j + 2 * half + 1]


def tma_box_sw128_f32(stage: np.ndarray, start: int) -> np.ndarray:
    """The 64 x 32 fp32 box a 128B-swizzled tensor map reads from shared memory at float offset `start` (TMA's
    layout, written independently of stage_dq): element (r, c) at byte r * 128 + ((c / 4) ^ (r % 8)) * 16 +
    (c % 4) * 4."""
    r, c = np.arange(BLOCK_M)[:, None], np.arange(DQ_PANEL_COLS)[None, :]
    return stage[start + (r * 128 + (((c // 4) ^ (r % 8)) << 4) + (c % 4) * 4) // 4]


def dq_writer(dq_rows: np.ndarray, stage: np.ndarray, d: int) -> None:
    """bwd_dq_writer: per tile and panel, dq_accum[rows of the block, 32 panel + (0..31)] += the panel's box."""
    tiles = 2 if d < 128 else 1
    panels = d // DQ_PANEL_COLS
    for tile in range(tiles):
        for panel in range(panels):
            start = (tile * panels + panel) * DQ_PANEL_FLOATS
            dq_rows[:, panel * DQ_PANEL_COLS:(panel + 1) * DQ_PANEL_COLS] += tma_box_sw128_f32(stage, start)


def first_m_block(n_block, seqlen_q, seqlen_k, causal):
    if not causal:
        return 0
    first_row = n_block * BLOCK_N - (seqlen_k - seqlen_q)
    return 0 if first_row <= 0 else first_row // BLOCK_M


def exact_grads(q, k, v, dout, scale, causal):
    seqlen_q, seqlen_k = q.shape[1], k.shape[1]
    s = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if causal:
        allowed = np.arange(seqlen_k)[None, :] <= np.arange(seqlen_q)[:, None] + seqlen_k - seqlen_q
        s = np.where(allowed, s, -np.inf)
    row_max = s.max(-1, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0)
    e = np.exp(s - row_max)
    z = e.sum(-1, keepdims=True)
    p = e / np.where(z > 0, z, 1)
    lse = np.where(z[..., 0] > 0, np.log(np.where(z > 0, z, 1)[..., 0]) + row_max[..., 0], -np.inf)
    out = np.einsum("bhqk,bkhd->bqhd", p, v)
    dp = np.einsum("bqhd,bkhd->bhqk", dout, v)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    grads = (np.einsum("bhqk,bkhd->bqhd", ds, k) * scale, np.einsum("bhqk,bqhd->bkhd", ds, q) * scale,
             np.einsum("bhqk,bqhd->bkhd", p, dout))
    return out, lse, grads


def model(q, k, v, out, dout, lse, scale, causal, dq_bulk=False, overlap=False):
    """dq, dk, dv as the three kernels compute them (flash_bwd_prepost.cuh, flash_bwd.cuh); dq_bulk: the bulk-dQ
    variant's staging and reduce instead of reduce_dq; overlap: the overlap variants' order (flash_bwd_overlap.cuh):
    step j computes dQ_j-1 from dS^T buffer (j - 1) & 1 before writing dS^T_j into buffer j & 1, hands it off to
    query block m_block - 1's rows, step 0's dQ reads the unwritten buffer 1 (NaN here) and is discarded, and the
    last dQ is handed off after the loop."""
    batch, seqlen_q, nheads, d = q.shape
    seqlen_k = k.shape[1]
    rounded = (seqlen_q + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    # preprocess
    lse_log2 = np.full((batch, nheads, rounded), np.inf)
    lse_log2[:, :, :seqlen_q] = np.where(lse == -np.inf, np.inf, lse * np.log2(np.e))
    delta = np.zeros((batch, nheads, rounded))
    delta[:, :, :seqlen_q] = np.einsum("bqhd,bqhd->bhq", out, dout)
    dq_accum = np.zeros((batch, nheads, rounded, d))
    dk = np.full(k.shape, np.nan)
    dv = np.full(v.shape, np.nan)
    scale_log2 = scale * np.log2(np.e)
    split_keys = d < 128
    dq_cols = d if split_keys else d // 2

    def tile(x, start, rows, b, h):  # a TMA box: rows past the end arrive as zeros
        t = np.zeros((rows, d))
        part = x[b, start:start + rows, h]
        t[: len(part)] = part
        return t

    for b in range(batch):
        for h in range(nheads):
            for n_block in range((seqlen_k + BLOCK_N - 1) // BLOCK_N):
                k_tile, v_tile = tile(k, n_block * BLOCK_N, BLOCK_N, b, h), tile(v, n_block * BLOCK_N, BLOCK_N, b, h)
                dk_regs = np.zeros((2, 128, d // 2))
                dv_regs = np.zeros((2, 128, d // 2))

                def dq_from(panel, k_tile=k_tile):  # both warpgroups' dQ fragments from a dS^T panel
                    ds_t = read_sw128(panel, BLOCK_N)  # 128 keys x 64 queries
                    frags = []
                    for wg in range(2):
                        if split_keys:
                            dq, col0 = ds_t[wg * 64:wg * 64 + 64].T @ k_tile[wg * 64:wg * 64 + 64], 0
                        else:
                            dq, col0 = ds_t.T @ k_tile[:, wg * dq_cols:(wg + 1) * dq_cols], wg * dq_cols
                        frags.append((to_regs(dq, dq_cols), col0))
                    return frags

                def hand_off(frags, rows, b=b, h=h):
                    # Bulk dQ: both tiles (d64) or the one tile (d128) of a 32 KB stage, NaN first so a float that
                    # stage_dq misses poisons dq (in the kernel it would add step - 2's stale values).
                    stage = np.full(32768 // 4, np.nan)
                    for wg, (regs, col0) in enumerate(frags):
                        if dq_bulk:
                            stage_dq(stage, regs, wg, d)
                            continue
                        for half in range(2):  # reduce_dq
                            row = 16 * WARP + GROUP + 8 * half
                            for j in range(dq_cols // 8):
                                for e in range(2):
                                    np.add.at(dq_accum[b, h, rows], (row, col0 + 8 * j + 2 * QUAD + e),
                                              regs[:, 4 * j + 2 * half + e])
                    if dq_bulk:
                        dq_writer(dq_accum[b, h, rows], stage, d)

                ds_buffers = [np.full(BLOCK_N * 64, np.nan) for _ in range(2)]
                m_first = first_m_block(n_block, seqlen_q, seqlen_k, causal)
                for step, m_block in enumerate(range(m_first, rounded // BLOCK_M)):
                    q_tile = tile(q, m_block * BLOCK_M, BLOCK_M, b, h)
                    do_tile = tile(dout, m_block * BLOCK_M, BLOCK_M, b, h)
                    rows = slice(m_block * BLOCK_M, (m_block + 1) * BLOCK_M)
                    stage_lse, stage_delta = lse_log2[b, h, rows], delta[b, h, rows]
                    prev_dq = dq_from(ds_buffers[(step - 1) & 1]) if overlap else None  # issued with S^T_j
                    ds_panel = ds_buffers[step & 1] if overlap else np.zeros(BLOCK_N * 64)
                    last_key = (n_block + 1) * BLOCK_N - 1
                    needs_mask = last_key >= seqlen_k or (causal and last_key > m_block * BLOCK_M + seqlen_k - seqlen_q)
                    for wg in range(2):
                        keys = slice(wg * 64, wg * 64 + 64)
                        s = to_regs(k_tile[keys] @ q_tile.T, 64)
                        dp = to_regs(v_tile[keys] @ do_tile.T, 64)
                        cols = [frag_coords(i)[1] for i in range(32)]
                        if needs_mask:
                            for i in range(32):
                                key = n_block * BLOCK_N + wg * 64 + frag_coords(i)[0]
                                query = m_block * BLOCK_M + cols[i]
                                masked = key >= seqlen_k
                                if causal:
                                    masked |= key > query + seqlen_k - seqlen_q
                                s[masked, i] = -np.inf
                        for i in range(32):
                            s[:, i] = np.exp2(s[:, i] * scale_log2 - stage_lse[cols[i]])
                            dp[:, i] = s[:, i] * (dp[:, i] - stage_delta[cols[i]])
                        write_ds(ds_panel, dp, wg)
                        dv_regs[wg] += to_regs(from_a_fragments(s) @ do_tile, d)
                        dk_regs[wg] += to_regs(from_a_fragments(dp) @ q_tile, d)
                    if overlap:
                        if step > 0:  # dQ_j-1 to query block m_block - 1
                            hand_off(prev_dq, slice((m_block - 1) * BLOCK_M, m_block * BLOCK_M))
                    else:
                        hand_off(dq_from(ds_panel), rows)
                if overlap:  # the last dQ, after the loop
                    last = rounded // BLOCK_M - 1
                    hand_off(dq_from(ds_buffers[step & 1]), slice(last * BLOCK_M, (last + 1) * BLOCK_M))
                for wg in range(2):  # store_rows
                    for half in range(2):
                        key = n_block * BLOCK_N + wg * 64 + 16 * WARP + GROUP + 8 * half
                        ok = key < seqlen_k
                        for j in range(d // 8):
                            for e in range(2):
                                col = 8 * j + 2 * QUAD[ok] + e
                                dk[b, key[ok], h, col] = dk_regs[wg, ok, 4 * j + 2 * half + e] * scale
                                dv[b, key[ok], h, col] = dv_regs[wg, ok, 4 * j + 2 * half + e]
    dq = np.transpose(dq_accum[:, :, :seqlen_q], (0, 2, 1, 3)) * scale  # postprocess
    return dq, dk, dv


def main() -> int:
    rng = np.random.default_rng(0)
    failures = 0
    for seqlen_q, seqlen_k in [(1, 1), (17, 113), (113, 203), (239, 1), (128, 128), (200, 300), (300, 130)]:
        for d in (64, 128):
            for causal in (False, True):
                q, dout = (rng.standard_normal((1, seqlen_q, 2, d)) for _ in range(2))
                k, v = (rng.standard_normal((1, seqlen_k, 2, d)) for _ in range(2))
                out, lse, exact = exact_grads(q, k, v, dout, d**-0.5, causal)
                for dq_bulk, overlap in ((False, False), (True, False), (False, True), (True, True)):
                    got = model(q, k, v, out, dout, lse, d**-0.5, causal, dq_bulk, overlap)
                    errors = [float(np.max(np.abs(g - x))) if g.size else 0.0 for g, x in zip(got, exact)]
                    ok = max(errors) < 1e-9 and not any(np.isnan(g).any() for g in got)
                    failures += not ok
                    print(f"{seqlen_q}x{seqlen_k} d{d} {'causal' if causal else 'full':<6} "
                          f"{'bulk' if dq_bulk else 'red':<4} {'overlap' if overlap else 'plain':<7} "
                          f"max |error| dq {errors[0]:.1e} dk {errors[1]:.1e} "
                          f"dv {errors[2]:.1e} {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
