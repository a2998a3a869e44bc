"""Attention's share of a training step with an FP8 forward: forward + backward of one call, bf16 against
fp8=PerTileScaling(backward_from="quantized" | "inputs"), at the FlashAttention-3 paper's shapes (16384 tokens,
2048 = heads x head dim), on a GPU (backend auto: the native kernels on Hopper).

"quantized" adds a dequantization of Q and K and, with the rotation, dQ and dK rotated back (one bf16 GEMM with a
+-1 matrix each, then a scale) to the backward (fa3nn/fp8/backward.py); this measures what that costs against the FP8
forward's saving. Each figure is the median of --reps batches of --iters steps timed with CUDA events, the variants
interleaved per rep.

    python scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics

import torch

import fa3nn
from fa3nn.metrics import attention_flops

VARIANTS = {
    "bf16": None,
    "fp8 quantized": fa3nn.PerTileScaling(backward_from="quantized"),
    "fp8 inputs": fa3nn.PerTileScaling(backward_from="inputs"),
}


def step(q, k, v, dout, causal, recipe):
    out = fa3nn.flash_attn_func(q, k, v, causal=causal, fp8=recipe)
    return torch.autograd.grad(out, (q, k, v), dout)


def dequantize_alone(q8, k8, q_descale, k_descale, dq, rotation, block_q, block_k, kernel=False):
    from fa3nn.fp8.backward import dequantize

    dequantize(q8, q_descale, block_q, None, None, dq.dtype, kernel=kernel)
    dequantize(k8, k_descale, block_k, None, None, dq.dtype, kernel=kernel)


def rotate_back_alone(q8, k8, q_descale, k_descale, dq, rotation, block_q, block_k):
    from fa3nn.fp8.backward import rotate_back_all

    rotate_back_all((dq, dq), rotation)  # dQ and dK, as the backward does


def backward_extras(*operands):
    """What backward_from="quantized" adds to the backward, alone: Q and K dequantized, dQ and dK rotated back."""
    dequantize_alone(*operands)
    rotate_back_alone(*operands)


def backward_extras_fp32(q8, k8, q_descale, k_descale, dq, rotation, block_q, block_k):
    """backward_extras as first written (0ece33b): float32 copies, a float32 GEMM; kept to time the difference."""
    from fa3nn.fp8.scaling import rows_from_tiles

    for x8, descale, block in ((q8, q_descale, block_q), (k8, k_descale, block_k)):
        (x8.to(torch.float32) * rows_from_tiles(descale, block, x8.shape[1]).unsqueeze(-1)).to(dq.dtype)
    for _ in range(2):
        (dq.to(torch.float32) @ rotation.T).to(dq.dtype)


def time_batch(fn, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in causals:
                batch, heads = 16384 // seqlen, 2048 // headdim
                q, k, v, dout = (torch.randn(batch, seqlen, heads, headdim, device="cuda", dtype=torch.bfloat16)
                                 for _ in range(4))
                q, k, v = (t.requires_grad_() for t in (q, k, v))
                fns = {name: functools.partial(step, q, k, v, dout, causal, recipe)
                       for name, recipe in VARIANTS.items()}
                recipe = VARIANTS["fp8 quantized"]
                state = fa3nn.fp8.make_state(recipe, 0)
                a = fa3nn.fp8.recipe_arguments(recipe, state, q, k, v)
                *_, q8, k8, q_descale, k_descale = torch.ops.fa3nn.fwd_fp8(
                    q, k, v, None, None, seqlen, seqlen, headdim**-0.5, -1, 0 if causal else -1, 0.0, False, "auto",
                    a["block_q"], a["block_k"], a["rotation"], None, False, 0, True)
                fns["extras alone"] = functools.partial(
                    backward_extras, q8.view(torch.float8_e4m3fn), k8.view(torch.float8_e4m3fn), q_descale,
                    k_descale, dout, a["rotation"], a["block_q"], a["block_k"])
                for name, fn in (("dequantize alone", dequantize_alone),
                                 ("dequantize alone, Triton", functools.partial(dequantize_alone, kernel=True)),
                                 ("rotate_back alone", rotate_back_alone)):
                    fns[name] = functools.partial(fn, q8.view(torch.float8_e4m3fn), k8.view(torch.float8_e4m3fn),
                                                  q_descale, k_descale, dout, a["rotation"], a["block_q"],
                                                  a["block_k"])
                fns["extras alone, fp32 (before)"] = functools.partial(
                    backward_extras_fp32, q8.view(torch.float8_e4m3fn), k8.view(torch.float8_e4m3fn), q_descale,
                    k_descale, dout, a["rotation"], a["block_q"], a["block_k"])
                for fn in fns.values():  # warm-up: compile, autotune, allocator
                    time_batch(fn, 2)
                samples = {name: [] for name in fns}
                for _ in range(args.reps):
                    for name, fn in fns.items():
                        samples[name].append(time_batch(fn, args.iters))
                flops = attention_flops(batch, heads, seqlen, seqlen, headdim, headdim, causal, "fwd_bwd")
                base = statistics.median(samples["bf16"])
                for name, times in samples.items():
                    ms = statistics.median(times)
                    rows.append(dict(headdim=headdim, seqlen=seqlen, causal=causal, variant=name, ms=ms,
                                     tflops=flops / ms / 1e9, vs_bf16=base / ms, samples_ms=times))
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(meta)
    print("| hdim | seqlen | causal | variant | fwd+bwd ms | TFLOP/s | bf16 time / this |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['variant']} | "
              f"{r['ms']:.3f} | {r['tflops']:.0f} | {r['vs_bf16']:.3f} |")


if __name__ == "__main__":
    main()
