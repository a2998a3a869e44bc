"""Where the host's time goes in one attention training step (forward + backward of one call), bf16 against the FP8
recipes: cProfile over --iters steps after a warm-up, the functions by own time and by cumulative time.

fp8_train_step.py (s48b, H100, d128, 16k tokens) measured the host's time to issue one step at 0.79 ms for bf16 and
1.76 / 2.61 ms for fp8 "inputs" / "quantized", against 1.7-1.9 ms of kernels: the FP8 steps are host-bound there.

    python scripts/fp8_host_profile.py --seqlen 2048 --iters 50
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import pstats

import torch

import fa3nn

VARIANTS = {
    "bf16": None,
    "fp8 inputs": fa3nn.PerTileScaling(backward_from="inputs"),
    "fp8 quantized": fa3nn.PerTileScaling(backward_from="quantized"),
}


def step(q, k, v, dout, recipe):
    out = fa3nn.flash_attn_func(q, k, v, causal=False, fp8=recipe)
    return torch.autograd.grad(out, (q, k, v), dout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlen", type=int, default=2048)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    batch, heads = 16384 // args.seqlen, 2048 // args.headdim
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v, dout = (torch.randn(batch, args.seqlen, heads, args.headdim, device=device, dtype=torch.bfloat16)
                     for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    for name, recipe in VARIANTS.items():
        fn = functools.partial(step, q, k, v, dout, recipe)
        for _ in range(3):
            fn()
        if device == "cuda":
            torch.cuda.synchronize()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.iters):
            fn()
        profiler.disable()
        if device == "cuda":
            torch.cuda.synchronize()
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            stats = pstats.Stats(profiler, stream=text)
            stats.sort_stats(order).print_stats(args.top)
            total = stats.total_tt / args.iters * 1e3
            print(f"=== {name}: {total:.3f} ms host per step (cProfile), by {order}, per-call figures over "
                  f"{args.iters} steps")
            lines = text.getvalue().splitlines()
            start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
            for line in lines[start:start + args.top + 1]:
                print(line[:200])


if __name__ == "__main__":
    main()
