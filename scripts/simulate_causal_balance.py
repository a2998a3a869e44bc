"""Simulate how evenly the Hopper forward's persistent scheduler (kernels/hopper/scheduler.cuh) spreads causal work
over the SMs: max / mean of per-CTA work, work = key blocks + 1 per tile, at the FA3 paper's shapes (batch * seqlen =
16384, nheads * headdim = 2048). Compares the plain round-robin deal with the boustrophedon one (odd rounds
reversed), with and without L2 sections, and a dynamic deal (not built: each tile, in the same order, to the CTA
that frees up first, as an atomic tile counter would hand them out; over one longest-first section that is LPT
scheduling). Rows "fp8-128": the FP8 forward's d128 tiles on 256-key blocks. No GPU needed; the kernel's timing is
not modelled, only the deal. (The model held for the FP8 one-section deal at 8k, predicted 1.031 -> 1.002 and
measured +3.9%, but not for an LPT table deal at 2k-4k, predicted +2.3-2.7% and measured -2.7..+1.6%:
benchmarks/NOTES.md, twenty-fifth session.)

    python scripts/simulate_causal_balance.py
"""

from __future__ import annotations

import math

SMS = 132
L2_BYTES = 60 << 20  # the H200's cudaDevAttrL2CacheSize (about 60 MB)
TOKENS, WIDTH = 16384, 2048
# (head dim, seqlen) -> (block_m, block_n) as flash_fwd_launch.cuh picks them for causal calls; "fp8-128": the FP8
# forward's d128 default beyond 256 keys (128-row tiles, 256-key blocks; flash_fwd_fp8_launch.cuh).
TILES = {64: lambda s: (128, 128) if s <= 1024 else (192, 128),
         128: lambda s: (128, 128) if s <= 2048 else (128, 176),
         256: lambda s: (128, 48) if s <= 1024 else (128, 80),
         "fp8-128": lambda s: (128, 256)}
# flash_fwd_launch.cuh's use_l2_sections (variant 7's L2 sections, the deal before 2026-12-01) and
# use_one_pair_sections (the default deal's one-pair sections).
SECTIONED = {64: lambda s: False, 128: lambda s: s <= 8192, 256: lambda s: s <= 4096, "fp8-128": lambda s: s <= 8192}
ONE_PAIR = {64: lambda s: s <= 4096, 128: SECTIONED[128], 256: SECTIONED[256], "fp8-128": lambda s: s <= 4096}


def imbalance(seqlen: int, headdim: int | str, sections: str | None, boustrophedon: bool,
              dynamic: bool = False, num_bh: int | None = None) -> float:
    """sections: None (one section of every head), "l2" (as many heads as fit half the L2: variant 7's) or
    "one" (one head per section: the default deal's). num_bh: (batch, head) pairs, the paper's by default."""
    block_m, block_n = TILES[headdim](seqlen)
    width = 128 if headdim == "fp8-128" else headdim
    num_m = math.ceil(seqlen / block_m)
    num_bh = (TOKENS // seqlen) * (WIDTH // width) if num_bh is None else num_bh
    per_section = num_bh
    if sections == "l2":
        per_section = max(1, min(num_bh, (L2_BYTES // 2) // (2 * seqlen * width * 2)))
    elif sections == "one":
        per_section = 1
    deal_snake = boustrophedon
    work = [0.0] * SMS
    for tile in range(num_m * num_bh):
        section, i = divmod(tile, per_section * num_m)
        heads_here = min(per_section, num_bh - section * per_section)
        m_block = num_m - 1 - i // heads_here
        keys = min(seqlen, (m_block + 1) * block_m)
        rnd, j = divmod(tile, SMS)
        cta = work.index(min(work)) if dynamic else SMS - 1 - j if deal_snake and rnd % 2 else j
        work[cta] += math.ceil(keys / block_n) + 1
    return max(work) / (sum(work) / SMS)


def main() -> None:
    print("| hdim | seqlen | round-robin | boustrophedon | L2 sections, round-robin | L2 sections, boustrophedon "
          "| one-head sections, boustrophedon | variant 7 deal (before 12-01) | default deal | dynamic, L2 sections "
          "| dynamic, one section |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for headdim in (64, 128, 256, "fp8-128"):
        for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
            deals = ((None, False), (None, True), ("l2", False), ("l2", True), ("one", True))
            rr, snake, l2_rr, l2_snake, one_snake = (imbalance(seqlen, headdim, sec, b) for sec, b in deals)
            before = l2_rr if SECTIONED[headdim](seqlen) else snake
            since = one_snake if ONE_PAIR[headdim](seqlen) else snake
            dynamic = imbalance(seqlen, headdim, "l2", False, dynamic=True)
            # longest-first over every tile, each to the CTA that frees up first: LPT scheduling
            lpt = imbalance(seqlen, headdim, None, False, dynamic=True)
            print(f"| {headdim} | {seqlen} | {rr:.3f} | {snake:.3f} | {l2_rr:.3f} | {l2_snake:.3f} | {one_snake:.3f} "
                  f"| {before:.3f} | {since:.3f} | {dynamic:.3f} | {lpt:.3f} |")


if __name__ == "__main__":
    main()
