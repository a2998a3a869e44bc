"""Attention benchmark shared by every kernel issue: fa3nn backends side by side with torch SDPA's cuDNN,
FlashAttention-2 and memory-efficient backends, in one run on one GPU.

Shapes are the FlashAttention-3 paper's: batch * seqlen = 16384 tokens, nheads * headdim = 2048, bf16. FLOPs come
from fa3nn.metrics.attention_flops (the one formula). For each (head dim, seqlen, causal) and backend it
  1. checks the backend against fa3nn's fp32 reference on a slice (batch 0, two heads): out, dq, dk, dv;
  2. measures peak extra memory of one forward+backward (max allocated minus what the inputs already hold);
  3. times each direction with CUDA events: a sleep kernel is queued first so the timed calls are all enqueued before
     the GPU reaches them (no host gaps; the sleep is sized from a first, untimed batch's host time), `--iters`
     back-to-back calls over `--rotate` input sets (so L2 does not hold the inputs between calls), median of
     `--reps` such batches. The host time per call is recorded too (`fwd_host_ms`, `bwd_host_ms` in the JSON): a
     training step whose host time exceeds its device time runs at the host's pace.
  4. with `--rounds N`, repeats 1-3 N times per shape, the backends in a balanced order per round
     (bench_hopper.balanced_orders: each backend directly follows each other one equally often, so the clock and
     power state one leaves behind is charged to all alike), and reports each figure's median over the rounds
     (merge_rounds; every round's figures stay in the JSON). One round times each backend in one stretch, and the
     ratios then move with the GPU's state between the stretches: FP8 d128 16k against our bf16 read 1.45-1.55 over
     four single-round runs of the same kernels (benchmarks/NOTES.md, twenty-third session).
Writes benchmarks/results/<tag>.json and .md (GPU, torch/triton/cuDNN versions, date) and prints the table last.

    python scripts/bench.py                                 # the full grid (about 10 minutes on an H200)
    python scripts/bench.py --headdims 128 --seqlens 2048 8192 --backends triton cudnn fa2   # a quick look
    python scripts/bench.py --backends triton triton-fp8 hopper cudnn --directions fwd           # FP8 rows

FP8 rows (a backend name ending in -fp8, or -fp8-fast for the recipe with fast_exp2) are measured end to end, kernel
only and quantization only: bench_fp8.py.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from pathlib import Path

import bench_fp8
import torch
import torch.nn.functional as F
from bench_hopper import balanced_orders
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa3nn import explain, flash_attn_func
from fa3nn.backends.base import AttnParams
from fa3nn.backends.reference import backward_dense, forward_dense
from fa3nn.masks import Window
from fa3nn.metrics import attention_flops

TOKENS, WIDTH = 16384, 2048
SDPA = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION,
        "mem-eff": SDPBackend.EFFICIENT_ATTENTION}
FA3NN = ("triton", "hopper", "reference")
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def attention_fn(backend: str):
    """(q, k, v, causal) -> out for (batch, seqlen, heads, dim) tensors."""
    base = bench_fp8.fp8_base(backend)
    if base in FA3NN:
        return bench_fp8.attention_fn(backend)
    if backend in FA3NN:
        return lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal, backend=backend)
    if backend in SDPA:
        which = SDPA[backend]

        def sdpa(q, k, v, causal):
            with sdpa_kernel([which]):
                out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                     is_causal=causal)
            return out.transpose(1, 2)

        return sdpa
    raise ValueError(f"unknown backend {backend!r}; choose from {FA3NN + tuple(SDPA)}, or an fa3nn backend + "
                     f"'{bench_fp8.SUFFIX}' or '{bench_fp8.FAST_SUFFIX}'")


def check(fn, q, k, v, dout, causal, grads: bool = True) -> dict:
    """Max errors against fa3nn's reference (fp32 compute) on batch 0, heads 0-1: out absolute, grads relative
    (grads=False: the forward only, for forward-only runs)."""
    q, k, v, dout = (x[:1, :, :2].detach().contiguous() for x in (q, k, v, dout))
    params = AttnParams(q.shape[-1] ** -0.5, Window.from_args(causal, (-1, -1)), 0.0, False)
    out_ref, lse_ref = forward_dense(q, k, v, params)
    leaves = [x.clone().requires_grad_(grads) for x in (q, k, v)]
    out = fn(*leaves, causal)
    errors = {"out": (out - out_ref).abs().max().item()}
    if grads:
        grads_ref = backward_dense(dout, q, k, v, out_ref, lse_ref, None, params)
        for name, g, g_ref in zip(("dq", "dk", "dv"), torch.autograd.grad(out, leaves, dout), grads_ref):
            errors[name] = ((g.float() - g_ref.float()).abs().max() / g_ref.float().abs().max()).item()
    errors["ok"] = errors["out"] <= 2e-2 and max(errors.get(n, 0.0) for n in ("dq", "dk", "dv")) <= 5e-2
    return errors


def peak_extra_mib(fn, q, k, v, dout, causal) -> float:
    leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = fn(*leaves, causal)
    torch.autograd.grad(out, leaves, dout)
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def time_ms(calls, iters: int, reps: int, host_ms: list | None = None) -> float:
    """Median over `reps` of (device time of `iters` back-to-back calls) / iters; calls[i % len] is call i.
    Appends the median host time per call (enqueueing alone) to `host_ms` when given."""
    for call in calls:  # warm-up: compile, autotune, handles
        call()
    torch.cuda.synchronize()
    samples, host = [], []
    sleep_cycles = 2_000_000  # ~1 ms at 2 GHz: the GPU waits while the host enqueues the timed calls
    for rep in range(reps + 1):  # rep 0 measures the host time only, to size the sleep of the others
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(sleep_cycles)
        start.record()
        t0 = time.perf_counter()
        for i in range(iters):
            calls[i % len(calls)]()
        host.append((time.perf_counter() - t0) * 1e3 / iters)
        end.record()
        torch.cuda.synchronize()
        # The sleep must outlast the enqueueing, or host time leaks into the device time: at seqlen 512 one
        # Python-launched call can take longer to enqueue than to run.
        sleep_cycles = max(sleep_cycles, int(2 * host[-1] * iters * 2_000_000))
        if rep:
            samples.append(start.elapsed_time(end) / iters)
    if host_ms is not None:
        host_ms.append(statistics.median(host[1:]))
    return statistics.median(samples)


def bench_shape(backends, headdim, seqlen, causal, directions, args) -> dict:
    headdim_v = args.headdim_v or headdim  # --headdim-v: MLA's shapes (DeepSeek: q / k 192, v 128)
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    sets = []
    for _ in range(args.rotate):
        q, k, v, dout = (torch.randn(batch, seqlen, nheads, d, device="cuda", dtype=torch.bfloat16)
                         for d in (headdim, headdim, headdim_v, headdim_v))
        sets.append((q, k, v, dout))
    flops = {d: attention_flops(batch, nheads, seqlen, seqlen, headdim, headdim_v, causal=causal, direction=d)
             for d in ("fwd", "bwd")}
    row = {"headdim": headdim if headdim_v == headdim else f"{headdim}/{headdim_v}", "seqlen": seqlen, "batch": batch,
           "nheads": nheads, "causal": causal, "results": {}}
    for backend in backends:
        fn = attention_fn(backend)
        result: dict = {}
        base = bench_fp8.fp8_base(backend)
        if base is not None:
            try:
                row["results"][backend] = bench_fp8.bench(backend, sets, causal, flops["fwd"], time_ms, args)
            except Exception as exc:
                row["results"][backend] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            continue
        try:
            result["check"] = check(fn, *sets[0], causal, grads="bwd" in directions)
        except Exception as exc:  # a backend that can't run this shape says why, and the run goes on
            result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            row["results"][backend] = result
            continue
        if not result["check"]["ok"]:
            row["results"][backend] = result  # wrong answers are not timed
            continue
        if "bwd" in directions:
            result["peak_extra_mib"] = peak_extra_mib(fn, *sets[0], causal)
        if "fwd" in directions:
            host: list = []
            with torch.no_grad():
                ms = time_ms([lambda s=s, fn=fn: fn(s[0], s[1], s[2], causal) for s in sets], args.iters, args.reps,
                             host)
            result["fwd_ms"], result["fwd_tflops"], result["fwd_host_ms"] = ms, flops["fwd"] / ms / 1e9, host[0]
        bwd_runs_on = explain(*sets[0][:3], causal=causal, backend=backend).backward if backend in FA3NN else backend
        if bwd_runs_on != backend:
            result["bwd_runs_on"] = bwd_runs_on  # a forward-only backend: its backward is another one's, not timed
        elif "bwd" in directions:
            graphs = []
            for q, k, v, dout in sets:
                leaves = [x.detach().requires_grad_(True) for x in (q, k, v)]
                graphs.append((fn(*leaves, causal), leaves, dout))
            host = []
            ms = time_ms([lambda g=g: torch.autograd.grad(g[0], g[1], g[2], retain_graph=True) for g in graphs],
                         args.iters, args.reps, host)
            result["bwd_ms"], result["bwd_tflops"], result["bwd_host_ms"] = ms, flops["bwd"] / ms / 1e9, host[0]
            del graphs
        row["results"][backend] = result
    del sets
    torch.cuda.empty_cache()
    return row


def merge_rounds(rounds: list[dict]) -> dict:
    """One row from the rows of `rounds` rounds of one shape: each backend's numeric figures are their median over
    the rounds (a backend that failed its check or errored in any round keeps that round's result, so a flaky backend
    is never reported from its good rounds alone); the rounds' own results under "rounds"."""
    row = {key: value for key, value in rounds[0].items() if key != "results"}
    row["results"], row["rounds"] = {}, [r["results"] for r in rounds]
    for backend in rounds[0]["results"]:
        results = [r["results"][backend] for r in rounds]
        failed = [r for r in results if "error" in r or not r.get("check", {}).get("ok", True)]
        if failed:
            row["results"][backend] = failed[0]
            continue
        merged = dict(results[0])
        for key, value in results[0].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                merged[key] = statistics.median(r[key] for r in results if key in r)
        row["results"][backend] = merged
    return row


def environment() -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "triton": triton_version,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def triton_choices() -> dict:
    """The tiles the Triton backend's autotuner settled on, per kernel and key (empty if it never ran)."""
    try:
        from fa3nn.backends.triton import launch
    except ImportError:
        return {}
    choices = {}
    for (kind, _), tuner in launch._autotuned.items():
        for key, config in getattr(tuner, "cache", {}).items():
            choices[f"{kind} {key}"] = str(config)
    return choices


def rounds_note(report: dict) -> str:
    rounds = int(report.get("args", {}).get("rounds", 1))
    return f" Each figure the median of {rounds} rounds (--rounds; ratios of those medians)." if rounds > 1 else ""


def markdown(report: dict) -> str:
    env, backends, rows = report["environment"], report["backends"], report["rows"]
    ours = [b for b in backends if b in FA3NN]
    fp8 = [b for b in backends if bench_fp8.fp8_base(b)]
    peers = [p for p in ("cudnn", "fa2") if p in backends]
    lines = [
        f"# Attention benchmark: {env['gpu']}, {env['date']}",
        "",
        f"torch {env['torch']} (CUDA {env['cuda']}), cuDNN {env['cudnn']}, triton {env['triton']}; bf16, "
        f"batch x seqlen = {TOKENS}, nheads x headdim = {WIDTH}. TFLOP/s (fa3nn.metrics), peak = extra MiB of one "
        "fwd+bwd. `x` = not run (error or failed check, see JSON)." + rounds_note(report),
        "",
    ]
    header = ["hdim", "seqlen", "causal"]
    for b in backends:
        if b in fp8:  # end to end, kernel only, and the quantization pass's milliseconds
            header += [f"{b} fwd", f"{b} kernel", f"{b} quant ms", f"{b} quant ms ieee", f"{b} quant ms fwht",
                       f"{b} quant ms no-rot"]
        else:
            header += [f"{b} fwd", f"{b} bwd", f"{b} peak"]
    for b in ours:
        for p in peers:
            header += [f"{b}/{p} fwd", f"{b}/{p} bwd"]
    fp8_vs = [p for p in ("triton", "hopper", "cudnn") if p in backends]
    for b in fp8:
        header += [f"{b} kernel/{p} fwd" for p in fp8_vs] + [f"{b} fwd/{p} fwd" for p in fp8_vs]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]

    def num(value, fmt="{:.1f}"):
        return fmt.format(value) if value is not None else "x"

    for row in rows:
        cells = [str(row["headdim"]), str(row["seqlen"]), "yes" if row["causal"] else "no"]
        res = row["results"]
        for b in backends:
            r = res.get(b, {})
            if b in fp8:
                cells += [num(r.get("fwd_tflops")), num(r.get("kernel_tflops"))]
                quant_keys = ("quant_ms", "quant_ieee_ms", "quant_fwht_ms", "quant_no_rotation_ms")
                cells += [num(r.get(key), "{:.3f}") for key in quant_keys]
            else:
                cells += [num(r.get("fwd_tflops")), num(r.get("bwd_tflops")), num(r.get("peak_extra_mib"), "{:.0f}")]
        for b in ours:
            for p in peers:
                for d in ("fwd", "bwd"):
                    a, c = res.get(b, {}).get(f"{d}_tflops"), res.get(p, {}).get(f"{d}_tflops")
                    cells.append(num(a / c if a and c else None, "{:.2f}"))
        for b in fp8:
            for key in ("kernel_tflops", "fwd_tflops"):
                for p in fp8_vs:
                    a, c = res.get(b, {}).get(key), res.get(p, {}).get("fwd_tflops")
                    cells.append(num(a / c if a and c else None, "{:.2f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked before any GPU work (parser.error: usage and exit status 2): a seqlen of 0 or a head
    dim of 0 divided by zero, and one past TOKENS / WIDTH gave batch or nheads 0 and failed far from its cause."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", nargs="+", default=["triton", "cudnn", "fa2", "mem-eff"],
                        help=f"ratios: every fa3nn backend against cudnn and fa2; choices: {FA3NN + tuple(SDPA)}")
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--headdim-v", type=int, default=None,
                        help="V's head dim when it differs from q / k's (MLA: --headdims 192 --headdim-v 128)")
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    parser.add_argument("--directions", nargs="+", choices=["fwd", "bwd"], default=["fwd", "bwd"])
    parser.add_argument("--iters", type=int, default=10, help="back-to-back calls per timed batch")
    parser.add_argument("--reps", type=int, default=7, help="timed batches; the median is reported")
    parser.add_argument("--rotate", type=int, default=3, help="input sets cycled through (defeats L2 reuse)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times each shape is measured, the backends in a balanced order per round; medians")
    parser.add_argument("--precompile", type=int, default=0, metavar="WORKERS",
                        help="compile the Triton backend's autotune candidates in this many processes first")
    parser.add_argument("--fp8-tile-sweep", action="store_true",
                        help="time every Triton FP8 tile at the longest seqlen, non-causal (bench_fp8.py)")
    parser.add_argument("--fp8-quant-study", action="store_true",
                        help="FP8 rows also time the quantization pass with the rotation in fp32 FMA and as FWHT, and "
                        "compare their e4m3 values (slow to compile: bench_fp8.py)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--tag", default=None, help="file name stem (default: bench-<gpu>-<date>)")
    args = parser.parse_args(argv)
    # (values, largest allowed, why): batch = TOKENS // seqlen and nheads = WIDTH // headdim must stay >= 1
    limits = {"--seqlens": (args.seqlens, TOKENS, f"batch = {TOKENS} tokens // seqlen >= 1"),
              "--headdims": (args.headdims, WIDTH, f"nheads = {WIDTH} // headdim >= 1"),
              "--headdim-v": ([] if args.headdim_v is None else [args.headdim_v], None, None),
              **{f"--{name}": ([getattr(args, name)], None, None) for name in ("iters", "reps", "rotate", "rounds")}}
    for option, (values, most, why) in limits.items():
        for value in values:
            if value < 1 or (most is not None and value > most):
                parser.error(f"{option} must be >= 1" + (f" and <= {most} ({why})" if most else "") + f", got {value}")
    for backend in args.backends:
        try:
            attention_fn(backend)  # fail fast on a typo
        except ValueError as exc:
            parser.error(f"--backends: {exc}")
    return args


def main() -> None:
    args = parse_args()
    env = environment()
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    if args.precompile and "triton" in args.backends:
        from fa3nn.backends.triton.tune import precompile

        try:
            precompile(args.headdims, causals, workers=args.precompile)
        except Exception as exc:  # only a speed-up: the autotuner compiles whatever is missing
            print(f"precompile failed ({type(exc).__name__}: {exc}); compiling on demand", flush=True)
    tag = args.tag or f"bench-{env['gpu'].replace(' ', '_')}-{env['date'][:10]}"
    args.out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in causals:
                started = time.perf_counter()
                orders = balanced_orders(len(args.backends))
                rounds = [bench_shape([args.backends[i] for i in orders[r % len(orders)]], headdim, seqlen, causal,
                                      args.directions, args) for r in range(args.rounds)]
                rows.append(merge_rounds(rounds) if args.rounds > 1 else rounds[0])
                rows[-1]["wall_s"] = round(time.perf_counter() - started, 1)  # where a device call's time went
                print(json.dumps({k: rows[-1][k] for k in ("headdim", "seqlen", "causal", "wall_s")}), flush=True)
                report = {"environment": env, "backends": args.backends,
                          "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
                          "triton_autotune": triton_choices()}
                # Written after every shape, so a run cut short by a time limit keeps what it measured.
                (args.out_dir / f"{tag}.json").write_text(json.dumps(report, indent=1))
                (args.out_dir / f"{tag}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
