"""Attention's share of a training step with an FP8 forward: forward + backward of one call, bf16 against
fp8=PerTileScaling(backward_from="quantized" | "inputs"), at the FlashAttention-3 paper's shapes (16384 tokens,
2048 = heads x head dim), on a GPU (backend auto: the native kernels on Hopper).

"quantized" adds one pass over Q and K to the backward (fa3nn.fp8.backward.restore: dequantized, the rotation
undone); this measures what that costs against the FP8 forward's saving, the pass alone (Triton and PyTorch) and its
s47 form (dequantization, then dQ and dK rotated back). Each figure is the median of --reps batches of --iters steps
timed with CUDA events, the variants interleaved per rep; "host ms" is the host's time to issue one.

    python scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json out.json
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time

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


def restore_alone(q8, k8, q_descale, k_descale, dout, rotation, block_q, block_k, kernel=None):
    """What backward_from="quantized" adds to the backward, alone: Q and K restored (fa3nn.fp8.backward.restore)."""
    from fa3nn.fp8.backward import restore

    restore(q8, q_descale, block_q, None, None, rotation, dout.dtype, kernel=kernel)
    restore(k8, k_descale, block_k, None, None, rotation, dout.dtype, kernel=kernel)


def extras_s47(q8, k8, q_descale, k_descale, dout, rotation, block_q, block_k):
    """The same extras in their s47 form, kept to time the difference: Q and K dequantized in PyTorch (a contiguous
    descale, one out= multiply), then dQ and dK (dout stands in) rotated back with a bf16 GEMM on the +-1 matrix."""
    from fa3nn.fp8.scaling import rows_from_tiles

    for x8, descale, block in ((q8, q_descale, block_q), (k8, k_descale, block_k)):
        scale = rows_from_tiles(descale, block, x8.shape[1]).contiguous().unsqueeze(-1)
        torch.mul(x8.to(dout.dtype), scale, out=torch.empty(x8.shape, dtype=dout.dtype, device=x8.device))
    rotation = rotation.to(dout.device, torch.float32)
    c = rotation.abs().amax()
    signs = (rotation.T / c).to(dout.dtype)
    for _ in range(2):
        torch.mul(dout @ signs, c, out=torch.empty_like(dout))


def time_batch(fn, iters: int) -> tuple[float, float]:
    """(GPU ms, host ms) per call: CUDA events around `iters` calls, and the host's time to issue them (where the
    two are close the loop is host-bound and the GPU figure is the host's)."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    issued = time.perf_counter()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    issued = time.perf_counter() - issued
    end.synchronize()
    return start.elapsed_time(end) / iters, issued * 1e3 / iters


def profile(name: str, fn) -> None:
    """One call of fn under torch.profiler: its GPU kernels by total time, and their sum (against the call's
    event-timed figure, the rest is idle GPU time between kernels)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    kernels.sort(key=lambda e: -e.self_device_time_total)
    total = sum(e.self_device_time_total for e in kernels) / 1e3
    print(f"profile {name}: kernels {total:.3f} ms in all")
    for e in kernels[:10]:
        print(f"    {e.self_device_time_total / 1e3:8.3f} ms  x{e.count:<3d} {e.key[:100]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, print each variant's kernels by GPU time (torch.profiler, one step)")
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
                extras = (q8.view(torch.float8_e4m3fn), k8.view(torch.float8_e4m3fn), q_descale, k_descale, dout,
                          a["rotation"], a["block_q"], a["block_k"])
                fns["restore alone, Triton"] = functools.partial(restore_alone, *extras, kernel=True)
                fns["restore alone, PyTorch"] = functools.partial(restore_alone, *extras, kernel=False)
                fns["s47 extras (before)"] = functools.partial(extras_s47, *extras)
                for fn in fns.values():  # warm-up: compile, autotune, allocator
                    time_batch(fn, 2)
                samples = {name: [] for name in fns}
                host = {name: [] for name in fns}
                for _ in range(args.reps):
                    for name, fn in fns.items():
                        gpu_ms, host_ms = time_batch(fn, args.iters)
                        samples[name].append(gpu_ms)
                        host[name].append(host_ms)
                if args.profile:
                    for name in VARIANTS:
                        profile(name, fns[name])
                flops = attention_flops(batch, heads, seqlen, seqlen, headdim, headdim, causal, "fwd_bwd")
                base = statistics.median(samples["bf16"])
                for name, times in samples.items():
                    ms = statistics.median(times)
                    rows.append(dict(headdim=headdim, seqlen=seqlen, causal=causal, variant=name, ms=ms,
                                     host_ms=statistics.median(host[name]), tflops=flops / ms / 1e9,
                                     vs_bf16=base / ms, samples_ms=times))
    meta = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(meta)
    print("| hdim | seqlen | causal | variant | fwd+bwd ms | host ms | TFLOP/s | bf16 time / this |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['variant']} | "
              f"{r['ms']:.3f} | {r['host_ms']:.3f} | {r['tflops']:.0f} | {r['vs_bf16']:.3f} |")


if __name__ == "__main__":
    main()
