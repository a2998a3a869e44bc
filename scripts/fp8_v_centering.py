"""Does subtracting V's mean before quantization stop the FP8 forward's drift without per-block promotion?

Every softmax row sums to 1, so attention(Q, K, V) = attention(Q, K, V - c) + c exactly for any vector c per
(batch, kv head) over the head dim, under any mask (a row attending no key aside). With c = V's mean over the keys,
the P·V products a row sums are of both signs, so the FP8 tensor cores' truncating accumulation (which loses ~1.2% of
V's mean per 1000 keys when the products are all positive; scripts/fp8_accumulation_bias.py) should err both ways
and cancel. If it does, the unpromoted overlapped kernels (d128 192-key ~810 TFLOP/s, d256 ~1060-1150 at 4k-16k)
would be correct again for the cost of one reduction over V and one add on O; the promoted serial kernels run
-11..-20% slower. This measures it on V distributions that break the zero-mean case: mean 1, a per-column mean,
lognormal (skewed: after centering ~65% of entries are negative), a sharper softmax, and a mean that trends along
the sequence under a causal mask (global centering leaves each query's local mean).

    python scripts/fp8_v_centering.py --json out.json [--headdims 128 256] [--seqlens 4096 16384]
        [--dists mean1 colmean lognormal peaked trend] [--variants128 ...] [--variants256 ...]

For every kernel it prints the output's rms error against fp64 attention of the bf16 inputs (relative to the
output's rms) and its bias (mean error over the output's rms), plain and centered.
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
from fa3nn.masks import Window

DISTS = ("gauss", "mean1", "colmean", "lognormal", "peaked", "trend")


def inputs(dist: str, seqlen: int, headdim: int, nheads: int = 4):
    """q, k, v (bf16, cuda) and the mask for one distribution."""
    torch.manual_seed(seqlen + headdim + DISTS.index(dist))
    shape = (1, seqlen, nheads, headdim)
    q, k, noise = (torch.randn(shape, device="cuda") for _ in range(3))
    window = Window()
    if dist == "gauss":
        v = noise
    elif dist in ("mean1", "peaked"):
        v = noise + 1
        if dist == "peaked":  # logits 6.25x wider: each row's weight on few keys
            q, k = q * 2.5, k * 2.5
    elif dist == "colmean":
        v = noise + 3 * torch.randn(1, 1, nheads, headdim, device="cuda")
    elif dist == "lognormal":
        v = noise.exp()
    else:  # trend: the mean climbs from -1 to 3 along the keys; causal, so early queries see a mean far from c
        v = noise + torch.linspace(-1, 3, seqlen, device="cuda").view(1, seqlen, 1, 1)
        window = Window(-1, 0)
    return q.bfloat16(), k.bfloat16(), v.bfloat16(), window


def errors(out: torch.Tensor, truth: torch.Tensor) -> tuple[float, float]:
    """(rms error, mean error), both over the rms of truth."""
    diff = out.double() - truth
    norm = truth.pow(2).mean().sqrt()
    return (diff.pow(2).mean().sqrt() / norm).item(), (diff.mean() / norm).item()


def outputs(q, k, v, window, scale, variants, block_k) -> dict[str, torch.Tensor]:
    quantized = quantize_qkv(q, k, v, PerTileScaling(block_k=block_k, incoherent=False))
    args = (quantized.q, quantized.k, transpose_v(quantized.v), quantized.q_descale, quantized.k_descale,
            quantized.v_descale, quantized.block_q, quantized.block_k, scale, window)
    outs = {"emulation": attention_fp8(quantized, scale, window, out_dtype=torch.float32)[0]}
    for variant in variants:
        outs[variant] = fp8_forward(*args, variant=variant)[0]
    outs["triton"] = triton_fp8(*args, None, None, None, None, torch.bfloat16)[0]
    return outs


def measure(dist: str, headdim: int, seqlen: int, variants: list[str], block_k: int) -> list[dict]:
    q, k, v, window = inputs(dist, seqlen, headdim)
    scale = headdim**-0.5
    mask = None if not window.causal else torch.ones(seqlen, seqlen, dtype=torch.bool, device="cuda").tril()
    truth = torch.nn.functional.scaled_dot_product_attention(
        *(x.double().transpose(1, 2) for x in (q, k, v)), attn_mask=mask, scale=scale).transpose(1, 2)
    bf16 = launch(q, k, v, scale, window.causal)[0]
    plain = outputs(q, k, v, window, scale, variants, block_k)
    c = v.float().mean(dim=1, keepdim=True)
    centered = outputs(q, k, (v.float() - c).bfloat16(), window, scale, variants, block_k)
    rows = [{"dist": dist, "headdim": headdim, "seqlen": seqlen, "kernel": "bf16",
             "plain": errors(bf16, truth), "centered": None}]
    for name in plain:
        rows.append({"dist": dist, "headdim": headdim, "seqlen": seqlen, "kernel": name,
                     "plain": errors(plain[name], truth), "centered": errors(centered[name] + c, truth)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--dists", nargs="+", default=list(DISTS[1:]), choices=DISTS)
    # The defaults (promoted: 192-key at d128, 128-key at d256), the promoted 128-key d128 kernel, and the unpromoted
    # overlapped kernels (2026-12-01 eighth session's run named these by the variants of that time: serial,
    # key_block_192_serial, no_promotion, key_block_192 at d128; full = unpromoted and serial at d256).
    parser.add_argument("--variants128", nargs="*", default=["full", "serial", "no_promotion", "key_block_192"])
    parser.add_argument("--variants256", nargs="*", default=["full", "no_promotion"])
    parser.add_argument("--block-k", type=int, default=384, help="K/V rows per descale: 384 serves 128- and 192-key "
                        "kernels")
    args = parser.parse_args()
    rows = []
    for dist in args.dists:
        for headdim in args.headdims:
            for seqlen in args.seqlens:
                variants = args.variants128 if headdim == 128 else args.variants256
                rows += measure(dist, headdim, seqlen, variants, args.block_k)
                torch.cuda.empty_cache()
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=1)
    print("| dist | d | seqlen | kernel | rms err plain | bias plain | rms err centered | bias centered |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{x:.2e}" for x in r["plain"]] + ([f"{x:.2e}" for x in r["centered"]] if r["centered"] else
                                                      ["", ""])
        print(f"| {r['dist']} | {r['headdim']} | {r['seqlen']} | {r['kernel']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
