"""Device check of the native Hopper backward and its variants: per-gradient errors, then backward-only timing of
every selected variant (hopper_bwd.VARIANTS; --variants, default all) against cuDNN and fa3nn's Triton backward in
the same run; one device call.

1. Errors, per variant, smallest case first (a wrong phase traps after ~2^30 polls rather than hanging): each of
   dq, dk, dv judged by the error-ratio rule (fa3nn.testing.error_ratio) against the fp32 / bf16 reference pair, with
   max |error| / max |ref| printed beside it, per case, so a failure says which gradient is wrong
   (benchmarks/NOTES.md, "Hopper backward", says what each pattern points at).
2. Timing of the variants whose cases all passed (all of them with --time-anyway): backward only, the FA3 paper's
   shapes (batch * seqlen = 16384 tokens, nheads * headdim = 2048, bf16), out/lse from the native forward; cuDNN's
   backward is SDPA's autograd backward (its forward excluded); TFLOP/s from fa3nn.metrics.attention_flops. Variants
   are timed one after the other on the same inputs, so their ratio (last column: each variant over the first one
   given) is from one run.
Writes $OUT/hopper_bwd_check.json (else benchmarks/results/) and prints a table last.

    FA3NN_HOPPER_LIB=build/libfa3nn_hopper.so python scripts/hopper_bwd_device_check.py
    FA3NN_HOPPER_LIB=build/libfa3nn_hopper.so python scripts/hopper_bwd_device_check.py --variants red_dq bulk_dq
    FA3NN_HOPPER_LIB=build/libfa3nn_hopper.so python scripts/hopper_bwd_device_check.py --variants red_dq overlap
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402
from bench_hopper import compare_libraries  # noqa: E402

from fa3nn.backends import hopper_bwd  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.hopper import launch as hopper_forward  # noqa: E402
from fa3nn.backends.triton.launch import backward as triton_backward  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402
from fa3nn.testing.error_ratio import error_ratio_report  # noqa: E402
from fa3nn.testing.reference import attention_ref  # noqa: E402

CASES = [  # (headdim, seqlen_q, seqlen_k, causal), smallest first
    (128, 128, 128, False), (128, 128, 128, True), (64, 128, 128, False), (128, 113, 203, True),
    (64, 239, 1, True), (128, 1024, 1024, False), (128, 1024, 1024, True), (64, 511, 1537, True),
]


def params(headdim, causal):
    return AttnParams(headdim**-0.5, Window.from_args(causal, (-1, -1)), 0.0, False)


def _grads_ref(q, k, v, dout, causal, upcast):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out, _ = attention_ref(*leaves, causal=causal, upcast=upcast, reorder_ops=not upcast)
    out.backward(dout)
    return [t.grad for t in leaves]


def rel_error(a, b) -> float:
    """max |a - b| / max |b| (b = 0 everywhere: over 1e-12)."""
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-12)).item()


def check_gradients(row: dict, q, k, v, dout, causal, grads) -> dict:
    """Per gradient into row: max |error| / max |ref| (`dq`, ...) and the error-ratio rule's report (`dq_rule`, ...)
    against the fp32 / bf16 reference pair; row["ok"] (already set by the caller) and-ed with each rule's verdict."""
    refs = _grads_ref(q, k, v, dout, causal, upcast=True)
    pts = _grads_ref(q, k, v, dout, causal, upcast=False)
    for name, g, r, pt in zip(("dq", "dk", "dv"), grads, refs, pts):
        row[name] = rel_error(g, r)
        passed, row[name + "_rule"] = error_ratio_report(g, r, pt)
        row["ok"] &= passed
    return row


def time_calls(row: dict, calls: dict, flops: float, iters: int, reps: int) -> dict:
    """Backward TFLOP/s of each call into row[name], or the error that call raised (one failing must not lose the
    others' numbers)."""
    for name, call in calls.items():
        try:
            row[name] = flops / (time_ms([call], iters, reps) * 1e-3) / 1e12
        except Exception as exc:
            row[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return row


def errors(headdim, seqlen_q, seqlen_k, causal, variant, dtype=torch.bfloat16) -> dict:
    """The error-ratio rule (tests' rule) per gradient, plus max|error| / max|ref| for orientation. The relative
    error alone is no verdict: at seqlen_k = 1 dq and dk are exactly 0 in exact arithmetic (P = 1 on the one key, so
    dS = dP - delta = 0), and the first device run read 5.6e5 there for a kernel the rule passes."""
    q = torch.randn(2, seqlen_q, 4, headdim, device="cuda", dtype=dtype)
    k, v = (torch.randn(2, seqlen_k, 4, headdim, device="cuda", dtype=dtype) for _ in range(2))
    dout = torch.randn_like(q)
    p = params(headdim, causal)
    out, lse = hopper_forward(q, k, v, p.softmax_scale, causal)
    grads = hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal, variant=variant)
    torch.cuda.synchronize()
    row = {"case": f"d{headdim} {seqlen_q}x{seqlen_k} {'causal' if causal else 'full'}", "variant": variant,
           "ok": True}
    return check_gradients(row, q, k, v, dout, causal, grads)


def timing(headdim, seqlen, causal, variants, iters, reps, libraries=None) -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v, dout = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    p = params(headdim, causal)
    out, lse = hopper_forward(q, k, v, p.softmax_scale, causal)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        sdpa_out = F.scaled_dot_product_attention(*(x.transpose(1, 2) for x in leaves), is_causal=causal)
    sdpa_dout = dout.transpose(1, 2)
    calls = {
        f"hopper:{variant}": (lambda variant=variant: hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale,
                                                                         causal, variant=variant))
        for variant in variants if variant in hopper_bwd.variants_for(headdim)
    }
    calls |= {  # other builds of the library (--compare), their default variant
        f"hopper@{name}": (lambda lib=lib: hopper_bwd.launch(dout, q, k, v, out, lse, p.softmax_scale, causal,
                                                              library=lib))
        for name, lib in (libraries or {}).items()
    }
    calls |= {
        "triton": lambda: triton_backward(dout, q, k, v, out, lse, None, p, None),
        "cudnn": lambda: torch.autograd.grad(sdpa_out, leaves, sdpa_dout, retain_graph=True),
    }
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="bwd")
    row = time_calls({"headdim": headdim, "seqlen": seqlen, "causal": causal}, calls, flops, iters, reps)
    for variant in variants:  # built for other head dims only (hopper_bwd.VARIANT_HEADDIMS): a table cell says so
        row.setdefault(f"hopper:{variant}", f"not built for d{headdim}")
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-anyway", action="store_true", help="time even if a correctness case failed")
    parser.add_argument("--variants", nargs="+", default=list(hopper_bwd.VARIANTS), choices=list(hopper_bwd.VARIANTS),
                        help="backward variants to check and time (default: all built); the first is the baseline "
                             "of the ratio column")
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=PATH",
                        help="other builds of the library, their default variant timed as hopper@NAME")
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 64])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 16384])
    args = parser.parse_args()
    libraries = compare_libraries(parser, args.compare)
    torch.manual_seed(0)
    report = {"errors": [], "timing": []}
    report["variants"] = args.variants
    for variant in args.variants:
        for case in (c for c in CASES if variant in hopper_bwd.variants_for(c[0])):
            row = errors(*case, variant)
            report["errors"].append(row)
            print(f"{variant:<16} {row['case']:<24} dq {row['dq']:.2e} dk {row['dk']:.2e} dv {row['dv']:.2e} "
                  f"{'ok' if row['ok'] else 'FAIL'}", flush=True)
    passed = all(r["ok"] for r in report["errors"])
    # A variant with a wrong gradient is left out of the timing (the others still get their same-run numbers).
    timed = [v for v in args.variants
             if args.time_anyway or all(r["ok"] for r in report["errors"] if r["variant"] == v)]
    report["timed_variants"] = timed
    out_dir = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[1] / "benchmarks" / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    # Written after every timed shape and each shape printed as it finishes, so a run cut short by a timeout
    # (4 variants + Triton + cuDNN x 8 shapes) still leaves what it measured.
    (out_dir / "hopper_bwd_check.json").write_text(json.dumps(report, indent=1))
    if timed:
        for headdim in args.headdims:
            for seqlen in args.seqlens:
                for causal in (False, True):
                    row = timing(headdim, seqlen, causal, timed, args.iters, args.reps, libraries)
                    report["timing"].append(row)
                    print(json.dumps(row), flush=True)
                    (out_dir / "hopper_bwd_check.json").write_text(json.dumps(report, indent=1))
    hoppers = [f"hopper:{v}" for v in timed] + [f"hopper@{name}" for name in libraries]

    def ratio(r, a, b):
        return f"{r[a] / r[b]:.2f}" if isinstance(r[a], float) and isinstance(r[b], float) else "-"

    names = [*hoppers, "triton", "cudnn"]
    ratios = [f"{h} / cuDNN" for h in hoppers] + [f"{h} / {hoppers[0]}" for h in hoppers[1:]]
    print(f"\n| hdim | seqlen | causal | {' | '.join(names)} (bwd TFLOP/s) | {' | '.join(ratios)} |")
    print("|---" * (3 + len(names) + len(ratios)) + "|")
    for r in report["timing"]:
        cells = [f"{r[n]:.0f}" if isinstance(r[n], float) else r[n][:40] for n in names]
        cells += [ratio(r, h, "cudnn") for h in hoppers] + [ratio(r, h, hoppers[0]) for h in hoppers[1:]]
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {' | '.join(cells)} |")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
