"""Where a backward's device time goes, kernel by kernel: fa3nn's Triton backward (delta, dK/dV, dQ) beside torch
SDPA's cuDNN backward, at the benchmark's shapes (bf16, batch * seqlen = 16384 tokens, nheads * head dim = 2048).

Each backward runs --iters times under torch.profiler after a warm-up; every kernel's device time is summed by
name and divided by --iters. The table gives each kernel's microseconds, its share of the backward, and the TFLOP/s
of the whole backward by the formula of fa3nn.metrics (2.5x the forward's FLOPs, halved when causal), so that a
kernel's time can be read against the matmul work it does (the Triton dK/dV kernel 4 matmuls, dQ 3; cuDNN 5; at
d256 the output split's dV kernel 2 and dK kernel 3, "#0" and "#1" of the same function in launch order). Run with
FA3NN_TRITON_BWD_STREAMS=0 for each kernel's time alone (with the second stream the dQ kernel overlaps the others).
Writes $OUT/bwd_breakdown.json (or --json) and prints the table last.

    python scripts/bwd_breakdown.py --headdims 64 128 --seqlens 2048 8192
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from fa3nn import flash_attn_func  # noqa: E402
from fa3nn.backends.triton.tune import benchmark_inputs  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def _forward(name: str, q, k, v, causal: bool):
    """The output of one forward of `name` ("triton" or "cudnn"), whose graph every timed backward reuses."""
    if name == "triton":
        out = flash_attn_func(q, k, v, causal=causal, backend="triton")
    else:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in (q, k, v)), is_causal=causal)
    return out


def profile(name: str, headdim: int, seqlen: int, causal: bool, iters: int, group: int = 1) -> dict:
    q, k, v, dout = benchmark_inputs(headdim, seqlen)
    if group > 1:  # GQA: every group-th K/V head kept (contiguous), the same query heads and FLOPs
        k, v = (x[:, :, ::group].contiguous() for x in (k, v))
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = _forward(name, q, k, v, causal)
    grad = dout if name == "triton" else dout.transpose(1, 2)

    def step():
        torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    launches = defaultdict(int)
    for event in events:
        launches[event.name] += 1
    per_kernel, seen = defaultdict(float), defaultdict(int)
    for event in events:  # a kernel launched more than once per backward (the output split's dV and dK kernels
        per_step = launches[event.name] // iters  # share one Triton function) is labelled by its launch order
        label = f"{event.name}#{seen[event.name] % per_step}" if per_step > 1 else event.name
        seen[event.name] += 1
        per_kernel[label] += event.device_time / iters  # microseconds
    total = sum(per_kernel.values())
    flops = attention_flops(q.shape[0], q.shape[2], seqlen, seqlen, headdim, causal=causal, direction="bwd")
    return dict(backend=name, headdim=headdim, seqlen=seqlen, causal=causal, group=group, total_us=total,
                tflops=flops / total / 1e6, kernels=dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[2048, 8192])
    parser.add_argument("--backends", nargs="+", choices=["triton", "cudnn"], default=["triton", "cudnn"])
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--groups", nargs="+", type=int, default=[1],
                        help="query heads per K/V head (GQA; 1 = MHA): the same FLOPs, 1/group of the dK/dV "
                             "programs, each walking group query heads after one K/V load")
    parser.add_argument("--json", type=Path, default=Path(os.environ.get("OUT", ".")) / "bwd_breakdown.json")
    args = parser.parse_args()
    rows = [profile(name, d, s, causal, args.iters, g) for d in args.headdims for s in args.seqlens
            for causal in (False, True) for g in args.groups for name in args.backends]
    args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows),
                                    indent=1))
    print("| backend | d | seqlen | causal | group | TFLOP/s | total us | kernel: us (share) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        parts = "; ".join(f"{n[:48]}: {us:.0f} ({us / r['total_us']:.0%})" for n, us in r["kernels"].items()
                          if us >= 0.01 * r["total_us"])
        print(f"| {r['backend']} | {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['group']} | "
              f"{r['tflops']:.0f} | {r['total_us']:.0f} | {parts} |")


if __name__ == "__main__":
    main()
