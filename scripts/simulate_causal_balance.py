"""Simulate how evenly the Hopper forward's persistent scheduler (kernels/hopper/scheduler.cuh) spreads causal work
over the SMs: max / mean of per-CTA work, work = key blocks + 1 per tile, at the FA3 paper's shapes (batch * seqlen =
16384, nheads * headdim = 2048). Compares the plain round-robin deal with the boustrophedon one (odd rounds
reversed), with and without L2 sections. No GPU needed; the kernel's timing is not modelled, only the deal.

    python scripts/simulate_causal_balance.py
"""

from __future__ import annotations

import math

SMS = 132
L2_BYTES = 60 << 20  # the H200's cudaDevAttrL2CacheSize (about 60 MB)
TOKENS, WIDTH = 16384, 2048
# (head dim, seqlen) -> (block_m, block_n) as flash_fwd_launch.cuh picks them for causal calls.
TILES = {64: lambda s: (128, 128) if s <= 1024 else (192, 128),
         128: lambda s: (128, 128) if s <= 2048 else (128, 176),
         256: lambda s: (128, 64) if s <= 1024 else (128, 80)}


def imbalance(seqlen: int, headdim: int, sections: bool, boustrophedon: bool) -> float:
    block_m, block_n = TILES[headdim](seqlen)
    num_m, num_bh = math.ceil(seqlen / block_m), (TOKENS // seqlen) * (WIDTH // headdim)
    per_section = num_bh
    if sections:  # as launch() computes heads_per_section
        per_section = max(1, min(num_bh, (L2_BYTES // 2) // (2 * seqlen * headdim * 2)))
    deal_snake = boustrophedon and per_section >= num_bh  # the kernel reverses rounds only with one section
    work = [0.0] * SMS
    for tile in range(num_m * num_bh):
        section, i = divmod(tile, per_section * num_m)
        heads_here = min(per_section, num_bh - section * per_section)
        m_block = num_m - 1 - i // heads_here
        keys = min(seqlen, (m_block + 1) * block_m)
        rnd, j = divmod(tile, SMS)
        work[SMS - 1 - j if deal_snake and rnd % 2 else j] += math.ceil(keys / block_n) + 1
    return max(work) / (sum(work) / SMS)


def main() -> None:
    print("| hdim | seqlen | round-robin | boustrophedon | sections, round-robin |")
    print("|---|---|---|---|---|")
    for headdim in (64, 128, 256):
        for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
            deals = ((False, False), (False, True), (True, False))
            rr, snake, sec = (imbalance(seqlen, headdim, sections, b) for sections, b in deals)
            print(f"| {headdim} | {seqlen} | {rr:.2f} | {snake:.2f} | {sec:.2f} |")


if __name__ == "__main__":
    main()
