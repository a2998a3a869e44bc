"""s53's GEMM-work model for trimming the native forward's masked key blocks per consumer warpgroup (benchmarks/NOTES.md
"s53 offline"): causal, seqlen_q = seqlen_k, the default tiles (head dim: consumers, kBlockN); each warpgroup's work
per visited key block is kBlockN columns untrimmed, its attended columns rounded up to 16 trimmed. Prints the trimmed
share of the untrimmed work: all masked blocks, the first visited block only (Q K^T and P V at 16-column steps), and
the first block's P V only at the branch's widths (DiagWidths; one-block tiles untrimmed), the form built."""

import math

TILES = {64: (3, 128), 128: (2, 176), 256: (2, 80)}  # head dim: (consumer warpgroups, kBlockN)
WIDTHS = {128: (16, 64), 176: (32, 96), 80: (16, 48)}  # kBlockN: the two narrower widths (DiagWidths)


def shares(consumers: int, block_n: int, seqlen: int) -> tuple[float, float, float]:
    block_m = 64 * consumers
    full = trimmed = first_only = pv_only = 0
    for m in range(math.ceil(seqlen / block_m)):
        blocks = math.ceil(min(seqlen, (m + 1) * block_m) / block_n)
        for wg in range(consumers):
            first_row = m * block_m + wg * 64
            if first_row >= seqlen:
                continue
            end_row = min(seqlen, first_row + 64)
            for n in range(blocks):
                cols = 16 * math.ceil(max(0, min(block_n, end_row - n * block_n)) / 16)
                full += block_n
                trimmed += cols
                first = n == blocks - 1
                first_only += cols if first else block_n
                width = min([w for w in WIDTHS[block_n] if w >= cols] + [block_n])
                pv_only += (block_n + width) / 2 if first and blocks > 1 else block_n
    return trimmed / full, first_only / full, pv_only / full


for headdim, (consumers, block_n) in TILES.items():
    for seqlen in (512, 1024, 2048, 8192):
        every, first, pv = shares(consumers, block_n, seqlen)
        print(f"d{headdim} {seqlen}: all masked blocks {every:.3f}, first block only {first:.3f}, "
              f"first block's P V at the widths {pv:.3f}")
