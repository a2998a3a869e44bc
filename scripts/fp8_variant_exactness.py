"""Is a native FP8 benchmark variant the same function as the default kernel? Both run on the same quantized inputs
(FA3's shapes: batch x seqlen = 16384 tokens, nheads x headdim = 2048); prints the largest absolute difference of
the outputs and of the lse, and the SQNR of each against the bf16 Hopper kernel (--against: another variant instead
of the default). A variant that only reorders the schedule (e.g. key_block_256_split_s, d128's default kernel itself
from 512 keys on; the eighteenth session's P V in head-dim parts, benchmarks/NOTES.md) or the rows' assignment to
warpgroups (fused_turn_w3 against fused_turn) should differ by exactly 0.

    python scripts/fp8_variant_exactness.py --variant key_block_256_split_s --headdims 128 --seqlens 2048 16384
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH  # noqa: E402

from fa3nn.backends.hopper import launch  # noqa: E402
from fa3nn.backends.hopper_fp8 import fp8_forward  # noqa: E402
from fa3nn.fp8.operands import transpose_v  # noqa: E402
from fa3nn.fp8.quantize import quantize_qkv_tensors  # noqa: E402
from fa3nn.fp8.scaling import sqnr_db  # noqa: E402
from fa3nn.masks import Window  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", required=True)
    parser.add_argument("--against", default="full", help="the variant it should equal (default: the default kernel)")
    parser.add_argument("--headdims", type=int, nargs="+", default=[128])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 16384])
    parser.add_argument("--block-k", type=int, default=256)
    args = parser.parse_args()
    print(f"| d | seqlen | causal | max abs diff out | max abs diff lse | SQNR {args.against} / {args.variant} vs bf16 "
          "(dB) |")
    print("|---|---|---|---|---|---|")
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            batch, nheads = TOKENS // seqlen, WIDTH // headdim
            q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                       for _ in range(3))
            quantized = quantize_qkv_tensors(q, k, v, 128, args.block_k)
            vt8 = transpose_v(quantized.v)
            for causal in (False, True):
                window = Window(-1, 0) if causal else Window()
                (out0, lse0), (out1, lse1) = (
                    fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale,
                                quantized.v_descale, quantized.block_q, quantized.block_k, headdim ** -0.5, window,
                                variant=variant)
                    for variant in (args.against, args.variant))
                bf16 = launch(q, k, v, headdim ** -0.5, causal)[0]
                d_out = (out0.float() - out1.float()).abs().max().item()
                d_lse = (lse0 - lse1).abs().max().item()
                print(f"| {headdim} | {seqlen} | {'yes' if causal else 'no'} | {d_out:.3g} | {d_lse:.3g} | "
                      f"{sqnr_db(out0, bf16):.2f} / {sqnr_db(out1, bf16):.2f} |", flush=True)


if __name__ == "__main__":
    main()
