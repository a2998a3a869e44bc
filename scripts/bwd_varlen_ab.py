"""The native backward on packed (varlen) batches, and its dense kernels against a base build's.

1. Dense, against `--base` (a library built from another revision, with the C ABI before varlen: no cu_seqlens /
   max_seqlen arguments, called here through its own ctypes signature): the same inputs, rounds interleaved, time
   ratios base / this build, FlashAttention-3 paper shapes (batch x seqlen = 16384 tokens, nheads x headdim = 2048).
2. Varlen, 16384 packed tokens, the paper's heads: this build's native backward against the Triton backward on the
   same packed call (what varlen trained on before) and, where every sequence has one length L, against the native
   dense backward of the (16384 / L, L) batch. TFLOP/s with the FLOPs summed per sequence (fa3nn.metrics).
   "mixed" draws lengths uniformly from [256, 4096], "short" from [32, 1024] (seed 0) until 16384 tokens.
   With --window LEFT, the causal sliding window (LEFT, 0) in every call of this part (and causal only); FLOPs count
   each sequence's attended pairs. With --softcap C, every call of this part caps its scores at C (native forward
   and backward, the Triton backward on the same lse). --headdim-v 128 with --headdims 192: multi-head latent
   attention's head dims (nheads = 2048 / 192 = 10). --variants: native backward variants timed beside auto's
   choice on the same packed call (rows variant_<name>); --no-triton drops the Triton backward; --compare NAME=PATH
   times another build of the library (main's, say) on the same packed call, in its default variant (rows
   build_<name>), rounds interleaved with this build's.

    python scripts/bwd_varlen_ab.py --json out.json [--base build_main/libfa3nn_hopper.so] [--rounds 5]
        [--compare main=build/main/libfa3nn_hopper.so]
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import random
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402
from bwd_prepost_ab import kernel_times  # noqa: E402

from fa3nn.backends import hopper_build, hopper_bwd  # noqa: E402
from fa3nn.backends.base import AttnParams, Varlen  # noqa: E402
from fa3nn.backends.hopper import launch as forward  # noqa: E402
from fa3nn.backends.triton import launch as triton_launch  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def base_library(path: str) -> ctypes.CDLL:
    """A library with the backward's C ABI before varlen (13 pointers, 6 ints, ...)."""
    lib = ctypes.CDLL(path)
    ptr, i32 = ctypes.c_void_p, ctypes.c_int
    lib.fa3nn_hopper_bwd.argtypes = [ptr] * 13 + [i32] * 6 + [ctypes.POINTER(ctypes.c_int64), ctypes.c_float, i32,
                                                              i32, i32, i32, i32, ptr]
    lib.fa3nn_hopper_bwd.restype = i32
    lib.fa3nn_hopper_last_error.restype = ctypes.c_char_p
    return lib


def base_launch(lib, dout, q, k, v, out, lse, scale, causal):
    """The dense backward through the base library's ABI (default variant, auto grid order and CTAs)."""
    batch, seqlen_q, nheads, headdim = q.shape
    rows = 128
    seqlen_q_rounded = (seqlen_q + rows - 1) // rows * rows
    ws = dict(dtype=torch.float32, device=q.device)
    dq_accum = torch.empty(batch, nheads, seqlen_q_rounded, headdim, **ws)
    lse_log2, delta = (torch.empty(batch, nheads, seqlen_q_rounded, **ws) for _ in range(2))
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    strides = (ctypes.c_int64 * 24)(*[s for t in (q, k, v, out, dout, dq, dk, dv) for s in t.stride()[:3]])
    status = lib.fa3nn_hopper_bwd(
        dout.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), None,
        dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dq_accum.data_ptr(), lse_log2.data_ptr(), delta.data_ptr(),
        batch, seqlen_q, k.shape[1], nheads, k.shape[2], headdim, strides, float(scale), int(causal), 1,
        hopper_bwd.VARIANTS[hopper_bwd.DEFAULT_VARIANTS[headdim]], 0, 0, torch.cuda.current_stream().cuda_stream)
    if status:
        raise RuntimeError(lib.fa3nn_hopper_last_error().decode())
    return dq, dk, dv


def dense_ab(args, base) -> list:
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in (False, True):
                batch, nheads = TOKENS // seqlen, WIDTH // headdim
                q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                           for _ in range(3))
                scale = headdim**-0.5
                out, lse = forward(q, k, v, scale, causal)
                dout = torch.randn_like(out)
                new = hopper_bwd.launch(dout, q, k, v, out, lse, scale, causal)
                old = base_launch(base, dout, q, k, v, out, lse, scale, causal)
                same_dkdv = torch.equal(new[1], old[1]) and torch.equal(new[2], old[2])
                inputs = (dout, q, k, v, out, lse, scale, causal)
                calls = {"base": functools.partial(base_launch, base, *inputs),
                         "new": functools.partial(hopper_bwd.launch, *inputs)}
                samples = {m: [] for m in calls}
                for _ in range(args.rounds):
                    for m, c in calls.items():
                        samples[m].append(time_ms([c], args.iters, 1))
                ratios = sorted(b / n for b, n in zip(samples["base"], samples["new"]))
                flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal, direction="bwd")
                rows.append(dict(headdim=headdim, seqlen=seqlen, causal=causal, dkdv_bitwise_equal=same_dkdv,
                                 new_tflops=flops / statistics.median(samples["new"]) / 1e9,
                                 base_over_new_time=statistics.median(ratios), samples_ms=samples))
                print(rows[-1]["headdim"], seqlen, causal, round(rows[-1]["base_over_new_time"], 3), same_dkdv,
                      file=sys.stderr, flush=True)
    return rows


MIXED = {"mixed": (256, 4096), "short": (32, 1024)}  # uniform length ranges, seed 0, up to 16384 tokens


def lengths_of(case: str) -> list[int]:
    if case in MIXED:
        rng, lengths = random.Random(0), []
        while sum(lengths) < TOKENS:
            lengths.append(min(rng.randint(*MIXED[case]), TOKENS - sum(lengths)))
        return lengths
    return [int(case)] * (TOKENS // int(case))


def varlen_rows(args) -> list:
    rows = []
    builds = {name: hopper_build.load(Path(path)) for name, path in args.compare}
    for headdim in args.headdims:
        nheads = WIDTH // headdim
        for case in args.varlen_cases:
            lengths = lengths_of(case)
            starts = [0]
            for n in lengths:
                starts.append(starts[-1] + n)
            cu = torch.tensor(starts, dtype=torch.int32, device="cuda")
            varlen = Varlen(cu, cu, max(lengths), max(lengths), tuple(starts), tuple(starts))
            for causal in (True,) if args.window is not None else (False, True):
                window_size = (args.window, 0) if args.window is not None else (-1, -1)
                win = functools.partial(hopper_bwd.launch, window_size=window_size,  # the native backward
                                        softcap=args.softcap)
                headdim_v = args.headdim_v or headdim
                q = torch.randn(TOKENS, nheads, headdim, device="cuda", dtype=torch.bfloat16)
                k, v = (torch.randn(TOKENS, nheads // args.group, d, device="cuda", dtype=torch.bfloat16)
                        for d in (headdim, headdim_v))
                scale = headdim**-0.5
                out, lse = forward(q, k, v, scale, causal, varlen, window_size=window_size, softcap=args.softcap)
                dout = torch.randn_like(out)
                params = AttnParams(scale, Window.from_args(causal, window_size), args.softcap, False)
                flops = sum(attention_flops(1, nheads, n, n, headdim, headdim_v, causal=causal, direction="bwd",
                                            window=window_size if args.window is not None else None)
                            for n in lengths)
                calls = {"native_varlen": functools.partial(win, dout, q, k, v, out, lse, scale, causal,
                                                            varlen=varlen)}
                if not args.no_triton:
                    calls["triton_varlen"] = functools.partial(triton_launch.backward, dout, q, k, v, out, lse, None,
                                                               params, varlen)
                for variant in args.variants:
                    calls[f"variant_{variant}"] = functools.partial(win, dout, q, k, v, out, lse, scale, causal,
                                                                    varlen=varlen, variant=variant)
                for name, library in builds.items():
                    calls[f"build_{name}"] = functools.partial(win, dout, q, k, v, out, lse, scale, causal,
                                                               varlen=varlen, library=library)
                for schedule in args.schedules:  # explicit launches beside auto's choice
                    for order in ("key_blocks_inner", "key_blocks_outer"):
                        calls[f"{schedule}_{order.split('_')[-1]}"] = functools.partial(
                            win, dout, q, k, v, out, lse, scale, causal, varlen=varlen,
                            schedule=schedule, grid_order=order)
                if case not in MIXED:
                    q4, k4, v4, do4 = (t.view(len(lengths), lengths[0], *t.shape[1:]) for t in (q, k, v, dout))
                    o4, lse4 = forward(q4, k4, v4, scale, causal, window_size=window_size, softcap=args.softcap)
                    calls["native_dense"] = functools.partial(win, do4, q4, k4, v4, o4, lse4, scale, causal)
                    calls["dense_per_tile"] = functools.partial(win, do4, q4, k4, v4, o4, lse4, scale, causal,
                                                                schedule="per_tile")
                grads = {m: c() for m, c in calls.items()}
                ref = grads["native_varlen"]
                diffs = {m: max((g.reshape(r.shape) - r).abs().max().item() for g, r in zip(grads[m], ref))
                         for m in grads}
                samples = {m: [] for m in calls}
                for _ in range(args.rounds):
                    for m, c in calls.items():
                        samples[m].append(time_ms([c], args.iters, 1))
                tflops = {m: flops / statistics.median(s) / 1e9 for m, s in samples.items()}
                profile = ({m: kernel_times(calls[m]) for m in ("native_varlen", "native_dense", "dense_per_tile")}
                           if args.profile and case not in MIXED else None)
                rows.append(dict(headdim=headdim, case=case, causal=causal, window=args.window, softcap=args.softcap,
                                 group=args.group, sequences=len(lengths), tflops=tflops,
                                 max_abs_diff_to_native_varlen=diffs, samples_ms=samples, kernel_us=profile))
                print(headdim, case, causal, {m: round(t, 1) for m, t in tflops.items()}, diffs, file=sys.stderr,
                      flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=None, help="a base build's libfa3nn_hopper.so (the ABI before varlen)")
    parser.add_argument("--headdims", nargs="+", type=int, default=[64, 128])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[512, 2048, 16384])
    parser.add_argument("--varlen-cases", nargs="+", default=["512", "2048", "mixed"])
    parser.add_argument("--schedules", nargs="*", default=[], choices=["per_tile", "persistent"],
                        help="also time the varlen backward with these schedules, in both grid orders")
    parser.add_argument("--group", type=int, default=1, help="query heads per K/V head (GQA)")
    parser.add_argument("--profile", action="store_true",
                        help="per-kernel device times (torch.profiler) of varlen / dense calls on uniform lengths")
    parser.add_argument("--window", type=int, default=None,
                        help="varlen part: the causal sliding window (WINDOW, 0) in every call")
    parser.add_argument("--softcap", type=float, default=0.0, help="varlen part: the cap of every call's scores")
    parser.add_argument("--headdim-v", type=int, default=None,
                        help="V's head dim (MLA: --headdims 192 --headdim-v 128)")
    parser.add_argument("--variants", nargs="*", default=[], choices=list(hopper_bwd.VARIANTS),
                        help="varlen part: native variants timed beside auto's choice")
    parser.add_argument("--no-triton", action="store_true", help="varlen part: no Triton backward")
    parser.add_argument("--compare", nargs="+", default=[], metavar="NAME=PATH",
                        help="varlen part: other builds' libfa3nn_hopper.so timed on the same packed calls")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    pairs = [item.partition("=") for item in args.compare]
    if any(not sep or not name or not path for name, sep, path in pairs) or len({n for n, _, _ in pairs}) < len(pairs):
        parser.error(f"--compare expects NAME=PATH with distinct names, got {args.compare}")
    args.compare = [(name, path) for name, _, path in pairs]
    if args.headdim_v is not None and (len(args.headdims) != 1 or
                                       (args.headdims[0], args.headdim_v) not in hopper_bwd.HEADDIM_PAIRS):
        parser.error(f"--headdim-v {args.headdim_v} takes one --headdims value forming a pair of "
                     f"{hopper_bwd.HEADDIM_PAIRS}, got --headdims {args.headdims}")
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  dense=dense_ab(args, base_library(args.base)) if args.base else [], varlen=varlen_rows(args))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if result["dense"]:
        print("| d | seqlen | causal | TFLOP/s | base / this build (time) | dK, dV bitwise equal |")
        print("|---|---|---|---|---|---|")
        for r in result["dense"]:
            print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['new_tflops']:.1f} | "
                  f"{r['base_over_new_time']:.3f} | {r['dkdv_bitwise_equal']} |")
    extra = [m for m in (result["varlen"][0]["tflops"] if result["varlen"] else {})
             if m not in ("native_varlen", "triton_varlen", "native_dense")]
    for r in result["varlen"]:
        if r["kernel_us"]:
            print(f"kernel us, d{r['headdim']} {r['case']} causal {r['causal']}: {r['kernel_us']}")
    print("| d | lengths | causal | native varlen | triton varlen | native dense | max abs diff (triton, dense) |"
          + "".join(f" {m} |" for m in extra))
    print("|---|---|---|---|---|---|---|" + "---|" * len(extra))
    for r in result["varlen"]:
        t, d = r["tflops"], r["max_abs_diff_to_native_varlen"]
        print(f"| {r['headdim']} | {r['case']} ({r['sequences']}) | {'yes' if r['causal'] else 'no'} | "
              f"{t['native_varlen']:.1f} | {t.get('triton_varlen', float('nan')):.1f} | "
              f"{t.get('native_dense', float('nan')):.1f} | "
              f"{d.get('triton_varlen', float('nan')):.2e}, {d.get('native_dense', float('nan')):.2e} |"
              + "".join(f" {t.get(m, float('nan')):.1f} |" for m in extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
