"""Sustained rate, SM clock and power of attention kernels, one at a time: is a kernel limited by its instruction
schedule or by the GPU's power budget?

Each kernel runs back to back for `--seconds` while `nvidia-smi` samples the SM clock, the board power and the
active clock-event (throttle) reasons every 50 ms. The table gives TFLOP/s over the steady part of the window (after
`--settle` seconds), the mean SM clock and power there, and FLOPs per SM clock as a share of the tensor cores' peak
at that clock (bf16: 4096 FLOP/clk/SM dense, e4m3: 8192). Two kernels at the same share of peak per clock differ only
by clock; a kernel whose clock drops under load while its share stays is power-limited, and then fewer issued
instructions, not a shorter critical path, is what buys rate.

Kernels (head dim 128, the paper's 16k-token shape, non-causal unless named): our bf16 forward and cuDNN's (SDPA),
our FP8 forward (per-tile recipe, block_k 384) and its benchmark variants (--fp8-variants), cuDNN's FP8 forward
(per-tensor, when cudnn-frontend imports), and torch's dense bf16 and e4m3 matmuls (8192^3) as ceilings.

    python scripts/clock_probe.py --json out.json [--seqlen 16384] [--seconds 4] [--kernels bf16 cudnn ...]
        [--compare base=build/base/libfa3nn_hopper.so --kernels fp8 fp8_base --repeat 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH, compare_libraries  # noqa: E402

from fa3nn.metrics import attention_flops  # noqa: E402

PEAK_FLOP_PER_CLK_SM = {"bf16": 4096, "fp8": 8192}
SMI_FIELDS = "timestamp,clocks.sm,power.draw,{reasons}"


def attention_kernels(headdim: int, seqlen: int, causal: bool, block_k: int, fp8_variants: list[str],
                      wanted, libraries: dict | None = None) -> dict[str, tuple[str, float, object]]:
    """name -> (precision, FLOPs per call, fn) for the attention kernels of one shape that wanted(name) accepts (the
    FP8 operands and cuDNN's FP8 graph are built only when an FP8 kernel is asked for)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from fa3nn.backends.hopper import launch
    from fa3nn.backends.hopper_fp8 import fp8_forward
    from fa3nn.fp8.operands import transpose_v
    from fa3nn.fp8.quantize import quantize_qkv_tensors
    from fa3nn.masks import Window

    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = headdim**-0.5
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal)
    window = Window(-1, 0) if causal else Window()
    libraries = libraries or {}
    fp8_names = ["fp8", *(f"fp8_{variant}" for variant in fp8_variants), *(f"fp8_{name}" for name in libraries)]
    if any(wanted(name) for name in fp8_names):
        quantized = quantize_qkv_tensors(q, k, v, 128, block_k)
        vt8 = transpose_v(quantized.v)

    def fp8(variant, library=None):
        return lambda: fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale,
                                   quantized.v_descale, quantized.block_q, quantized.block_k, scale, window,
                                   variant=variant, library=library)

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal, scale=scale)

    kernels = {name: (precision, flops, fn) for name, precision, fn in (
        ("bf16", "bf16", lambda: launch(q, k, v, scale, causal)), ("cudnn", "bf16", cudnn)) if wanted(name)}
    builds = [("full", None), *((variant, None) for variant in fp8_variants),
              *(("full", lib) for lib in libraries.values())]
    kernels.update({name: ("fp8", flops, fp8(*build)) for name, build in zip(fp8_names, builds) if wanted(name)})
    if not wanted("cudnn_fp8"):
        return kernels
    try:
        import cudnn as cudnn_fe
        from bench_cudnn_fp8 import CudnnFP8, per_tensor_quantize

        per_tensor = per_tensor_quantize(q, k, v)
        kernels["cudnn_fp8"] = ("fp8", flops, CudnnFP8(cudnn_fe, cudnn_fe.create_handle(), per_tensor, scale, causal,
                                                       "e4m3", False))
    except Exception as exc:  # no cudnn-frontend here, or cuDNN refused the graph: the row is left out, said why
        print(f"cudnn_fp8 left out: {type(exc).__name__}: {exc}", flush=True)
    return kernels


def matmul_kernels(wanted, n: int = 8192) -> dict[str, tuple[str, float, object]]:
    if not (wanted("matmul_bf16") or wanted("matmul_fp8")):
        return {}
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.to(torch.float8_e4m3fn).t()  # column-major B, as _scaled_mm wants
    one = torch.ones((), device="cuda")
    flops = 2.0 * n**3
    kernels = {"matmul_bf16": ("bf16", flops, lambda: a @ b),
               "matmul_fp8": ("fp8", flops, lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16))}
    return {name: kernel for name, kernel in kernels.items() if wanted(name)}


def smi_fields() -> str:
    """The query fields; the throttle-reason field was renamed (clocks_throttle_ -> clocks_event_) in newer drivers."""
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        fields = SMI_FIELDS.format(reasons=reasons)
        done = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            return fields
    raise SystemExit(f"clock_probe: nvidia-smi cannot report clocks here: {done.stdout} {done.stderr}")


def sample_clocks(fields: str) -> subprocess.Popen:
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "50"],
                            stdout=subprocess.PIPE, text=True)


def run_one(fn, seconds: float, settle: float, fields: str) -> dict:
    """Back-to-back calls for `seconds`; rate and smi samples over the part after `settle`."""
    fn()
    torch.cuda.synchronize()
    smi = sample_clocks(fields)
    t0 = time.time()
    marks = []  # (wall time after a synchronize, calls so far)
    calls = 0
    while time.time() - t0 < seconds:
        for _ in range(5):
            fn()
        calls += 5
        torch.cuda.synchronize()
        marks.append((time.time() - t0, calls))
    smi.terminate()
    lines = smi.communicate()[0].strip().splitlines()
    start = next(i for i, (t, _) in enumerate(marks) if t >= settle)
    (t_a, c_a), (t_b, c_b) = marks[start], marks[-1]
    # ms per call of each 5-call group after settle (each group ends with a synchronize): a kernel whose rate
    # alternates between fast and slow phases shows it here, not in the mean
    groups = sorted((t1 - t0) / (n1 - n0) * 1e3 for (t0, n0), (t1, n1) in zip(marks[start:], marks[start + 1:]))
    spread = {f"p{q}": groups[min(len(groups) - 1, len(groups) * q // 100)] for q in (10, 50, 90)} if groups else {}
    clocks, powers, reasons = [], [], set()
    first = None
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        try:
            stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            first = stamp if first is None else first
            if stamp - first < settle:  # smi starts with the loop: the same settling window as the rate
                continue
            clocks.append(float(parts[1]))
            powers.append(float(parts[2]))
            reasons.add(parts[3])
        except (IndexError, ValueError):
            continue
    return dict(seconds_per_call=(t_b - t_a) / (c_b - c_a), sm_mhz=statistics.mean(clocks) if clocks else None,
                sm_mhz_min=min(clocks, default=None), power_w=statistics.mean(powers) if powers else None,
                throttle_reasons=sorted(reasons), samples=len(clocks), ms_per_call_spread=spread)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True)
    parser.add_argument("--headdim", type=int, default=128)
    parser.add_argument("--seqlen", type=int, default=16384)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--block-k", type=int, default=384)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--kernels", nargs="*", default=None, help="names to run (default: all)")
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=PATH",
                        help="other builds of the library: their default FP8 kernel run as fp8_NAME")
    parser.add_argument("--repeat", type=int, default=1, help="run the kernel list this many times in turn")
    parser.add_argument("--fp8-variants", nargs="*", default=["key_block_192_skip_softmax"],
                        help="FP8 benchmark variants (fa3nn.backends.hopper_fp8.VARIANTS), run as fp8_<variant>")
    args = parser.parse_args(argv)

    def wanted(name: str) -> bool:
        return not args.kernels or name in args.kernels

    libraries = compare_libraries(parser, args.compare, args.fp8_variants)
    kernels = {**attention_kernels(args.headdim, args.seqlen, args.causal, args.block_k, args.fp8_variants, wanted,
                                   libraries), **matmul_kernels(wanted)}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fields = smi_fields()
    rows = []
    for name, (precision, flops, fn) in list(kernels.items()) * args.repeat:
        r = run_one(fn, args.seconds, args.settle, fields)
        tflops = flops / r["seconds_per_call"] / 1e12
        share = (tflops * 1e12 / (sms * r["sm_mhz"] * 1e6 * PEAK_FLOP_PER_CLK_SM[precision])
                 if r["sm_mhz"] else None)
        rows.append(dict(name=name, precision=precision, tflops=tflops, share_of_peak_per_clock=share, **r))
        print(f"{name}: {tflops:.0f} TFLOP/s, {r['sm_mhz']} MHz, {r['power_w']} W, {r['throttle_reasons']}, "
              f"ms per call p10/p50/p90 {r['ms_per_call_spread']}", flush=True)
    meta = dict(gpu=torch.cuda.get_device_name(0), torch=torch.__version__, headdim=args.headdim,
                seqlen=args.seqlen, causal=args.causal, seconds=args.seconds, settle=args.settle, sms=sms)
    Path(args.json).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    print("| kernel | TFLOP/s | SM MHz (min) | W | share of peak per clock | clock-event reasons |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        share = f"{r['share_of_peak_per_clock']:.3f}" if r["share_of_peak_per_clock"] else "-"
        clock = f"{r['sm_mhz']:.0f} ({r['sm_mhz_min']:.0f})" if r["sm_mhz"] else "-"
        power = f"{r['power_w']:.0f}" if r["power_w"] else "-"
        print(f"| {r['name']} | {r['tflops']:.0f} | {clock} | {power} | {share} | {' '.join(r['throttle_reasons'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
