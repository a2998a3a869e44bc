"""How far the FP8 forward's output drifts from its emulation as keys accumulate, for V with and without a mean.

Hopper's FP8 tensor cores add each wgmma's products into the fp32 accumulator with fewer mantissa bits than fp32
(DeepSeek-V3 reports ~14 retained bits on H800): a sum of positive terms (the mean component of V, or a row of
ones) loses a little at every k-step, always in the same direction, so the error grows with the number of keys,
while zero-mean V's errors largely cancel. This script measures it on the GPU: for V = mu + N(0, 1), mu in {0, 1},
the kernels' output against the emulation on the same e4m3 operands (fp32 accumulation; fa3nn.fp8.reference) and
against fp64 attention of the bf16 inputs, at head dim 128 (and 256), non-causal, seqlen 1k-16k.

    python scripts/fp8_accumulation_bias.py --json out.json [--variants full no_promotion key_block_192]
        [--block-k 384]
"""

from __future__ import annotations

import argparse
import json

import torch

from fa3nn.backends.hopper import launch
from fa3nn.backends.hopper_fp8 import fp8_forward
from fa3nn.backends.triton.fp8_launch import forward_fp8 as triton_fp8
from fa3nn.fp8 import PerTileScaling, quantize_qkv
from fa3nn.fp8.operands import transpose_v
from fa3nn.fp8.reference import attention_fp8
from fa3nn.fp8.scaling import mean_drift
from fa3nn.masks import Window


def rel_rms(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.double() - ref.double()).pow(2).mean().sqrt() / ref.double().pow(2).mean().sqrt()).item()


def measure(headdim: int, seqlen: int, mu: float, variants: list[str], block_k: int, nheads: int = 4) -> dict:
    torch.manual_seed(seqlen + headdim)
    q, k = (torch.randn(1, seqlen, nheads, headdim, device="cuda").to(torch.bfloat16) for _ in range(2))
    v = (torch.randn(1, seqlen, nheads, headdim, device="cuda") + mu).to(torch.bfloat16)
    scale = headdim**-0.5
    quantized = quantize_qkv(q, k, v, PerTileScaling(block_k=block_k, incoherent=False))
    vt8 = transpose_v(quantized.v)
    emul, _ = attention_fp8(quantized, scale, Window(), out_dtype=torch.float32)
    truth = torch.nn.functional.scaled_dot_product_attention(
        *(x.double().transpose(1, 2) for x in (q, k, v)), scale=scale).transpose(1, 2)
    row = {"headdim": headdim, "seqlen": seqlen, "mu": mu, "emul_vs_truth": rel_rms(emul, truth)}
    outs = {"bf16": launch(q, k, v, scale, False)[0]}
    args = (quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale, quantized.v_descale,
            quantized.block_q, quantized.block_k, scale, Window())
    for variant in variants:
        try:
            outs[f"fp8_{variant}"] = fp8_forward(*args, variant=variant)[0]
        except (ValueError, RuntimeError) as error:
            row[f"fp8_{variant}"] = str(error)[:80]
    outs["triton_fp8"] = triton_fp8(*args, None, None, None, None, torch.bfloat16)[0]
    for name, out in outs.items():
        row[f"{name}_vs_emul"] = rel_rms(out, emul)
        row[f"{name}_vs_truth"] = rel_rms(out, truth)
        # Mean signed drift against the emulation, in units of the mean output (mu's share of it).
        row[f"{name}_mean_drift"] = mean_drift(out, emul) if mu else 0.0
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--variants", nargs="*", default=["full"])
    parser.add_argument("--block-k", type=int, default=384, help="K/V rows per descale: 384 serves 128- and 192-key "
                        "kernels")
    args = parser.parse_args()
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for mu in (0.0, 1.0):
                rows.append(measure(headdim, seqlen, mu, args.variants, args.block_k))
                print(json.dumps(rows[-1]), flush=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    names = [k[: -len("_vs_emul")] for k in rows[0] if k.endswith("_vs_emul")]
    header = " | ".join(f"{n} vs emul / truth / mean drift" for n in names)
    print(f"| d | seqlen | mu | emul vs truth | {header} |")
    for r in rows:
        cells = [f"{r.get(n + '_vs_emul', float('nan')):.2e} / {r.get(n + '_vs_truth', float('nan')):.2e} / "
                 f"{r.get(n + '_mean_drift', float('nan')):+.2e}" for n in names]
        print(f"| {r['headdim']} | {r['seqlen']} | {r['mu']:g} | {r['emul_vs_truth']:.2e} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
