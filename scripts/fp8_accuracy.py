"""FP8 attention accuracy on FlashAttention-3's outlier distribution, as a markdown table for the README.

Each entry of Q, K, V is N(0, 1) + N(0, 100) * Bernoulli(0.001) (standard deviation 10 on 0.1% of entries, to
mimic LLM outlier features), drawn in fp32 and rounded to bf16, the kernels' input. Every row is the RMSE of the
attention output against an fp64 reference computed from those same bf16 inputs. All FP8 rows run fa3nn's FP8
emulation (fa3nn.fp8.reference: e4m3 Q, K, V and P, fp32 accumulation, the kernels' rounding points); the bf16 row
runs the same online-softmax code with bf16 operands and P rounded to bf16, i.e. a bf16 FlashAttention kernel.

    python scripts/fp8_accuracy.py            # batch 1, 8 heads, headdim 128, seqlen 2048/4096/8192, seeds 0-2
    python scripts/fp8_accuracy.py --nheads 2 --seqlens 1024 --seeds 0   # a quick look

The default takes about 20 minutes on 2 busy CPU cores (the fp64 reference and five emulations at seqlen 8192
dominate); 8 heads x 3 seeds keeps the spread of each mean to a few percent, where 2 heads leave ~5%.

Why the rows differ: e4m3 keeps 3 mantissa bits, so every quantized value carries up to 2^-4 relative error whatever
its scale; finer scale tiles help only where a tile's values would otherwise fall below e4m3's normal range. What
hurts is a query outlier meeting a key outlier at the same head-dim index: their product dominates the score and
carries that relative error whole. The Hadamard rotation spreads both outliers over all 128 dims, where the errors
of 128 terms average out. What remains is V's own e4m3 error (not rotated) and the rotated Q·K error; both grow
slowly with seqlen, as a longer row holds more outlier coincidences that dominate its softmax. Measured at seqlen
8192 (2 heads, seed 0), per-tile + incoherent: 9.38e-3; with V left unquantized 7.25e-3, with Q and K left
unquantized 6.05e-3, with P left unquantized 9.33e-3: V and Q·K share the error about equally, P is negligible.
Rotating V as well would not help: for a floating-point format the error energy sum(eps_i^2 x_i^2) is unchanged
by an orthogonal rotation; Q·K gains only because it is a dot product of two rotated vectors.
"""

from __future__ import annotations

import argparse
import time

import torch

from fa3nn import flash_attn_func
from fa3nn.fp8 import (
    CurrentScaling,
    DelayedScaling,
    DelayedScalingState,
    PerTileScaling,
    QuantizedQKV,
    attention_fp8,
    make_state,
    quantize_qkv,
)
from fa3nn.fp8.reference import attention_fp8_dense

PAPER = {"bf16": "", "per-tensor FP8": "2.4e-2", "per-tile FP8 + incoherent": "9.1e-3"}
TARGET = {"per-tile FP8 + incoherent": 9.1e-3}


def outlier_qkv(batch, seqlen, nheads, headdim, seed):
    generator = torch.Generator().manual_seed(seed)

    def draw():
        shape = (batch, seqlen, nheads, headdim)
        base = torch.randn(shape, generator=generator)
        outliers = torch.randn(shape, generator=generator) * 10 * (torch.rand(shape, generator=generator) < 0.001)
        return (base + outliers).to(torch.bfloat16)

    return draw(), draw(), draw()


def bf16_kernel_model(q, k, v, softmax_scale):
    ones = [torch.ones(x.shape[0], x.shape[2], 1) for x in (q, k, v)]
    operands = QuantizedQKV(q, k, v, *ones, block_q=q.shape[1], block_k=k.shape[1])
    out, _ = attention_fp8_dense(operands, softmax_scale, p_scale=1.0, p_dtype=torch.bfloat16, sum_rounded_p=False)
    return out


def fp8_output(q, k, v, recipe, softmax_scale, linear_exp2_every=0):
    state = make_state(recipe, layer_idx=0)
    # A fresh DelayedScalingState has no history, so its first forward scales each whole tensor by this call's
    # amax: per-tensor FP8, the paper's baseline granularity.
    assert state is None or not isinstance(state, DelayedScalingState) or not state.started
    out, _ = attention_fp8(quantize_qkv(q, k, v, recipe, state), softmax_scale, linear_exp2_every=linear_exp2_every)
    return out


# The linear exp2 rows (--linear-exp2): the benchmark kernels 48-50's P8 on a quarter / half / all of the scores
# (kernels/hopper/e4m3_exp2.cuh), on the default per-tile recipe.
LINEAR_ROWS = {"per-tile + incoherent, linear exp2 on 1/4": 4, "per-tile + incoherent, linear exp2 on 1/2": 2,
               "per-tile + incoherent, linear exp2 on all": 1}


def rows(linear_exp2=False):
    yield "bf16", None
    yield "per-tensor FP8", DelayedScaling()
    yield "per-(batch, head) FP8", CurrentScaling()
    yield "per-tile FP8", PerTileScaling(incoherent=False)
    yield "per-tile FP8 + incoherent", PerTileScaling(incoherent=True)
    if linear_exp2:
        for name in LINEAR_ROWS:
            yield name, PerTileScaling(incoherent=True)


def rmse(actual, ref):
    return (actual.to(torch.float64) - ref).pow(2).mean().sqrt().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--nheads", type=int, default=8)
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--linear-exp2", action="store_true", help="add the linear exp2 rows (LINEAR_ROWS)")
    args = parser.parse_args()
    if args.linear_exp2 and args.headdim != 128:
        parser.error("--linear-exp2 models d128's 256-key kernel (the only one with the linear exp2): --headdim 128")
    torch.set_grad_enabled(False)
    softmax_scale = args.headdim**-0.5
    errors: dict[tuple[str, int], list[float]] = {}
    for seqlen in args.seqlens:
        for seed in args.seeds:
            start = time.time()
            q, k, v = outlier_qkv(args.batch, seqlen, args.nheads, args.headdim, seed)
            ref = flash_attn_func(q.double(), k.double(), v.double(), backend="reference")
            for name, recipe in rows(args.linear_exp2):
                if recipe is None:
                    out = bf16_kernel_model(q, k, v, softmax_scale)
                else:
                    out = fp8_output(q, k, v, recipe, softmax_scale, LINEAR_ROWS.get(name, 0))
                errors.setdefault((name, seqlen), []).append(rmse(out, ref))
            print(f"seqlen {seqlen}, seed {seed}: {time.time() - start:.0f} s", flush=True)

    print(f"\nOutput RMSE vs an fp64 reference. Inputs: each entry N(0,1) + N(0,100)·Bernoulli(0.001), rounded to "
          f"bf16; batch {args.batch}, nheads {args.nheads}, headdim {args.headdim}, non-causal. Each cell: mean "
          f"over seeds {args.seeds} (min-max).\n")
    print("| precision | " + " | ".join(f"seqlen {s}" for s in args.seqlens) + " | FlashAttention-3 paper (H100) |")
    print("|---|" + "---|" * len(args.seqlens) + "---|")
    names = [name for name, _ in rows(args.linear_exp2)]
    for name in names:
        cells = []
        for seqlen in args.seqlens:
            values = errors[name, seqlen]
            cells.append(f"{sum(values) / len(values):.2e} ({min(values):.1e}-{max(values):.1e})")
        print(f"| {name} | " + " | ".join(cells) + f" | {PAPER.get(name, '')} |")
    for name, target in TARGET.items():
        for seqlen in args.seqlens:
            mean = sum(errors[name, seqlen]) / len(errors[name, seqlen])
            verdict = "meets" if mean <= target else "misses"
            print(f"\n{name}, seqlen {seqlen}: {mean:.2e} {verdict} the paper's {target:.1e}", end="")
    print()


if __name__ == "__main__":
    main()
