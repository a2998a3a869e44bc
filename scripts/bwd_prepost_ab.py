"""The native backward with its preprocess / postprocess kernels at 16-byte accesses (the default where the tensors
allow) against the 2-byte ones (hopper_bwd.launch(scalar_prepost=True)), whole backward, same process, rounds
interleaved; and torch.profiler's per-kernel device times of one call each way at the first shape of each head dim.
Shapes of the FlashAttention-3 paper (batch x seqlen = 16384 tokens, nheads x headdim = 2048), bf16.

    python scripts/bwd_prepost_ab.py --json out.json [--headdims 64 128] [--seqlens 512 2048 16384] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def kernel_times(call) -> dict:
    """Device microseconds per kernel name of one call (torch.profiler)."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    times: dict = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            name = event.name.split("<")[0].split("(")[0].replace("void ", "").replace("fa3nn::hopper::", "")
            times[name] = times.get(name, 0.0) + event.device_time
    return {k: round(v, 1) for k, v in times.items()}


def backward_inputs(headdim: int, seqlen: int, causal: bool, group: int = 1, headdim_v: int | None = None
                    ) -> tuple[tuple, float]:
    """hopper_bwd.launch's positional arguments for one paper shape (bf16; K/V with nheads / group heads, V of
    headdim_v (default headdim), the forward run natively to get out and lse) and the backward's FLOPs."""
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    headdim_v = headdim_v or headdim
    q = torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, seqlen, nheads // group, d, device="cuda", dtype=torch.bfloat16)
            for d in (headdim, headdim_v))
    scale = headdim**-0.5
    out, lse = forward(q, k, v, scale, causal)
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, headdim_v, causal=causal, direction="bwd")
    return (torch.randn_like(out), q, k, v, out, lse, scale, causal), flops


def timed_rounds(calls: dict, args, profiles: list, headdim: int, seqlen: int, causal: bool) -> dict:
    """Milliseconds per call of each mode, args.rounds rounds interleaved (each mode once per round); at the first
    sequence length, non-causal, the per-kernel device times of one call per mode go to `profiles`."""
    if seqlen == args.seqlens[0] and not causal:
        profiles.append(dict(headdim=headdim, seqlen=seqlen, **{mode: kernel_times(c) for mode, c in calls.items()}))
        print(profiles[-1], file=sys.stderr, flush=True)
    samples: dict = {mode: [] for mode in calls}
    for _ in range(args.rounds):
        for mode, c in calls.items():
            samples[mode].append(time_ms([c], args.iters, 1))
    return samples


def measure(headdim: int, seqlen: int, causal: bool, args, profiles: list) -> dict:
    inputs, flops = backward_inputs(headdim, seqlen, causal, headdim_v=args.headdim_v)

    def call(scalar: bool):
        return lambda: hopper_bwd.launch(*inputs, scalar_prepost=scalar)

    calls = {"vec": call(False), "scalar": call(True)}
    samples = timed_rounds(calls, args, profiles, headdim, seqlen, causal)
    ratios = sorted(s / v for v, s in zip(samples["vec"], samples["scalar"]))
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, samples_ms=samples,
                vec_tflops=flops / statistics.median(samples["vec"]) / 1e9,
                scalar_tflops=flops / statistics.median(samples["scalar"]) / 1e9,
                scalar_over_vec_time=statistics.median(ratios),
                quartiles=(ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))


def mode_row(headdim: int, seqlen: int, causal: bool, samples: dict, flops: float) -> dict:
    """A row of the mode A/B scripts (bwd_schedule_ab.py, bwd_build_ab.py): per mode TFLOP/s and its speedup over the
    first mode, the median of the per-round time ratios with their quartiles."""
    base = next(iter(samples))
    speedups = {}
    for mode in samples:
        ratios = sorted(a / b for a, b in zip(samples[base], samples[mode]))
        speedups[mode] = (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4])
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, samples_ms=samples, speedups=speedups,
                tflops={mode: flops / statistics.median(samples[mode]) / 1e9 for mode in samples})


def print_mode_table(rows: list, profiles: list, direction: str = "bwd") -> None:
    """mode_row rows as a markdown table (each mode against the first), then each profile's main-kernel time
    (flash_{direction}_kernel)."""
    modes = list(rows[0]["tflops"]) if rows else []
    base, others = modes[0] if modes else "", modes[1:]
    print(f"| d | seqlen | causal | {direction} TFLOP/s {base} | "
          + " | ".join(f"{m}: x {base} (quartiles)" for m in others) + " |")
    print("|---|---|---|---|" + "---|" * len(others))
    for r in rows:
        cells = [f"{r['tflops'][m]:.1f}: {s[0]:.3f} ({s[1]:.3f}-{s[2]:.3f})"
                 for m, s in ((m, r['speedups'][m]) for m in others)]
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['tflops'][base]:.1f} | "
              + " | ".join(cells) + " |")
    for p in profiles:
        print(f"d{p['headdim']} {p['seqlen']} main kernel us: " + ", ".join(
            f"{m} {next((t for k, t in p[m].items() if k.startswith(f'flash_{direction}_kernel')), 0):.1f}"
            for m in modes))


def ab_arguments(doc: str, extra=None) -> argparse.Namespace:
    """The command line of the backward A/B scripts (this one, bwd_schedule_ab.py, bwd_lib_ab.py); `extra(parser)`
    adds a script's own options."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if extra is not None:
        extra(parser)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--headdim-v", type=int, default=None,
                        help="V's head dim when it differs from q / k's (MLA: --headdims 192 --headdim-v 128)")
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 1024, 2048, 4096, 16384])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    check_headdim_v(parser, args)
    return args


def check_headdim_v(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--headdim-v names one (q / k, v) pair of the native kernels (hopper_bwd.HEADDIM_PAIRS) with one --headdims."""
    if args.headdim_v is None:
        return
    if len(args.headdims) != 1 or (args.headdims[0], args.headdim_v) not in hopper_bwd.HEADDIM_PAIRS:
        parser.error(f"--headdim-v {args.headdim_v} takes one --headdims value forming a pair of "
                     f"{hopper_bwd.HEADDIM_PAIRS}, got --headdims {args.headdims}")


def sweep(args: argparse.Namespace, measure) -> tuple[list, list]:
    """measure(headdim, seqlen, causal, args, profiles) over the shapes of `args`, causal and not; each row printed to
    stderr and the JSON (--json) rewritten as it comes."""
    rows: list = []
    profiles: list = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                rows.append(measure(headdim, seqlen, causal, args, profiles))
                print({k: v for k, v in rows[-1].items() if k != "samples_ms"}, file=sys.stderr, flush=True)
                if args.json:
                    args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), rows=rows,
                                                         profiles=profiles), indent=1))
    return rows, profiles


def main() -> None:
    rows, profiles = sweep(ab_arguments(__doc__), measure)
    print("| d | seqlen | causal | bwd TFLOP/s 16-B | 2-B | 2-B time / 16-B time (quartiles) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['vec_tflops']:.1f} | "
              f"{r['scalar_tflops']:.1f} | {r['scalar_over_vec_time']:.3f} ({r['quartiles'][0]:.3f}-"
              f"{r['quartiles'][1]:.3f}) |")
    for p in profiles:
        print(f"d{p['headdim']} {p['seqlen']} kernel us, 16-B: {p['vec']}  2-B: {p['scalar']}")


if __name__ == "__main__":
    main()
