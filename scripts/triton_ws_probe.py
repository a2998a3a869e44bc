"""Probe: does Triton's automatic warp specialization (Hopper pass of Triton >= 3.6, `tl.range(...,
warp_specialize=True)`) make a dK/dV loop faster than the same loop without it?

Offline (Triton 3.6, sm_90a) a minimal dK/dV loop with Q / dO through tensor descriptors, num_warps=4 and a 128-key
block compiles to 12 warps: one producer warpgroup (setmaxnreg 40) and two consumer warpgroups of 64 keys each
(setmaxnreg 232), FlashAttention-3's backward layout, without spills. Found on the way: Triton 3.6's pass accepts one
loop per kernel and no early return (both trip assertions in TaskIdPropagation / WSLowerToken), so fa3nn's dK/dV
kernel (masked and unmasked runs as two loops) cannot take the flag as it is.

This script times that minimal loop alone (non-causal, seqlen a multiple of both blocks, no masking: the steady
state of the library's unmasked run), with and without the flag, after checking dK and dV against torch. TFLOP/s
count the loop's 4 matmuls (4 * 2 * seqlen^2 * d per head), comparable with scripts/bwd_breakdown.py's dK/dV kernel
figure (its 4 matmuls) at the same shapes. Prints a table, writes --json.

    python scripts/triton_ws_probe.py --seqlens 2048 8192 16384 --json $OUT/ws_probe.json
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

LOG2E = 1.4426950408889634
# (warp_specialize, num_warps, block of keys, block of queries, stages, lse / delta through descriptors); the plain
# ones first: each variant runs in its own process under a timeout (the first GPU run of this probe, results/
# wsprobe-h200-20261202-1717, printed nothing in 150 s: a warp-specialized variant, the first in that order, hung).
VARIANTS = [(False, 8, 128, 64, 1, False), (False, 8, 128, 64, 2, False), (False, 4, 64, 64, 2, False),
            (True, 4, 128, 64, 2, True), (True, 4, 128, 64, 2, False), (True, 4, 128, 64, 3, True)]


@triton.jit
def _dkdv_probe(Qd, Kd, Vd, dOd, Lse, Delta, dK, dV, seqlen, qk_scale_log2, softmax_scale,
                HEAD_DIM: tl.constexpr, BLOCK_KEYS: tl.constexpr, BLOCK_QUERIES: tl.constexpr, WS: tl.constexpr,
                STATS_TMA: tl.constexpr):
    """STATS_TMA: Lse / Delta are descriptors over (rows / BLOCK_QUERIES, BLOCK_QUERIES) views, so every load of the
    loop is a TMA load (Triton's pass gives those to the producer warpgroup)."""
    n0 = tl.program_id(0) * BLOCK_KEYS
    row0 = tl.program_id(1) * seqlen
    k = Kd.load([row0 + n0, 0])
    v = Vd.load([row0 + n0, 0])
    dk = tl.zeros([BLOCK_KEYS, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_KEYS, HEAD_DIM], tl.float32)
    offs_q = tl.arange(0, BLOCK_QUERIES)
    for m0 in tl.range(0, seqlen, BLOCK_QUERIES, warp_specialize=WS):
        q = Qd.load([row0 + m0, 0])
        do = dOd.load([row0 + m0, 0])
        if STATS_TMA:
            lse = tl.reshape(Lse.load([(row0 + m0) // BLOCK_QUERIES, 0]), [BLOCK_QUERIES])
            delta = tl.reshape(Delta.load([(row0 + m0) // BLOCK_QUERIES, 0]), [BLOCK_QUERIES])
        else:
            lse = tl.load(Lse + row0 + m0 + offs_q)
            delta = tl.load(Delta + row0 + m0 + offs_q)
        p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale_log2 - lse[None, :])  # keys x queries
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk)
    rows = row0 + n0 + tl.arange(0, BLOCK_KEYS)
    cols = tl.arange(0, HEAD_DIM)
    tl.store(dK + rows[:, None] * HEAD_DIM + cols[None, :], (dk * softmax_scale).to(dK.dtype.element_ty))
    tl.store(dV + rows[:, None] * HEAD_DIM + cols[None, :], dv.to(dV.dtype.element_ty))


def inputs(heads: int, seqlen: int, head_dim: int, seed: int = 0):
    """(batch * heads * seqlen, d) bf16 Q, K, V, dO; lse (natural log, of the scaled scores) and delta = rowsum(dO O)
    from a torch forward, per row."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(heads, seqlen, head_dim, device="cuda", dtype=torch.bfloat16, generator=gen)
                   for _ in range(4))
    scale = 1.0 / math.sqrt(head_dim)
    lse = torch.empty(heads, seqlen, device="cuda", dtype=torch.float32)
    delta = torch.empty_like(lse)
    for h in range(heads):  # one head at a time: no heads x seqlen^2 buffer
        s = (q[h].float() @ k[h].float().T) * scale
        lse[h] = torch.logsumexp(s, dim=-1)
        out = torch.softmax(s, dim=-1) @ v[h].float()
        delta[h] = (do[h].float() * out).sum(-1)
    return q, k, v, do, lse, delta, scale


def reference(q, k, v, do, lse, delta, scale):
    """dK, dV in fp32 from the same lse / delta."""
    dk, dv = torch.empty_like(k, dtype=torch.float32), torch.empty_like(v, dtype=torch.float32)
    for h in range(q.shape[0]):
        p = torch.exp(q[h].float() @ k[h].float().T * scale - lse[h][:, None])
        dv[h] = p.T @ do[h].float()
        dp = do[h].float() @ v[h].float().T
        dk[h] = (p * (dp - delta[h][:, None])).T @ q[h].float() * scale
    return dk, dv


def launcher(variant, q, k, v, do, lse, delta, scale):
    """A closure launching the probe once (descriptors and buffers made here, outside the timed calls), and its
    (dK, dV) outputs."""
    ws, warps, block_keys, block_queries, stages, stats_tma = variant
    heads, seqlen, head_dim = q.shape
    flat = [x.reshape(heads * seqlen, head_dim) for x in (q, k, v, do)]
    qd = TensorDescriptor.from_tensor(flat[0], [block_queries, head_dim])
    kd = TensorDescriptor.from_tensor(flat[1], [block_keys, head_dim])
    vd = TensorDescriptor.from_tensor(flat[2], [block_keys, head_dim])
    dod = TensorDescriptor.from_tensor(flat[3], [block_queries, head_dim])
    dk = torch.empty_like(flat[1])
    dv = torch.empty_like(flat[2])
    grid = (seqlen // block_keys, heads)
    lse2 = (lse * LOG2E).reshape(-1)  # the kernel's exp2 takes log2-scaled lse
    delta = delta.reshape(-1)
    if stats_tma:
        lse2, delta = (TensorDescriptor.from_tensor(x.view(-1, block_queries), [1, block_queries])
                       for x in (lse2, delta))

    def run():
        _dkdv_probe[grid](qd, kd, vd, dod, lse2, delta, dk, dv, seqlen, scale * LOG2E, scale, HEAD_DIM=head_dim,
                          BLOCK_KEYS=block_keys, BLOCK_QUERIES=block_queries, WS=ws, STATS_TMA=stats_tma,
                          num_warps=warps, num_stages=stages)
    return run, (dk.view_as(k), dv.view_as(v))


def time_ms(fn, reps: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def label(variant) -> str:
    ws, warps, block_keys, block_queries, stages, stats_tma = variant
    tail = " stats-tma" if stats_tma else ""
    return f"{'ws' if ws else 'plain'} {block_keys}x{block_queries}/{warps}w/{stages}{tail}"


def run_variant(variant, args) -> None:
    """Check one variant against torch, time it at every seqlen, print one `ROW {json}` line per result."""
    check = inputs(4, 1024, args.head_dim, seed=1)
    want = reference(*check)
    run, got = launcher(variant, *check)
    run()
    errors = [((g.float() - w).abs().max() / w.abs().max()).item() for g, w in zip(got, want)]
    for seqlen in args.seqlens:
        heads = (args.tokens // seqlen) * (args.width // args.head_dim)
        run, _ = launcher(variant, *inputs(heads, seqlen, args.head_dim))
        ms = time_ms(run)
        flops = 4 * 2 * seqlen * seqlen * args.head_dim * heads
        print("ROW " + json.dumps(dict(variant=label(variant), seqlen=seqlen, heads=heads, ms=ms,
                                       tflops=flops / ms / 1e9, rel_err_dk=errors[0], rel_err_dv=errors[1])),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqlens", nargs="+", type=int, default=[2048, 8192, 16384])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=16384, help="batch * seqlen (the benchmark's shapes)")
    parser.add_argument("--width", type=int, default=2048, help="heads * head dim")
    parser.add_argument("--variant", type=int, default=None, help="run only VARIANTS[i] here (the driver's child)")
    parser.add_argument("--timeout", type=float, default=45.0, help="seconds per variant (a hang is a result)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.variant is not None:
        run_variant(VARIANTS[args.variant], args)
        return
    rows = []
    for i, variant in enumerate(VARIANTS):
        command = [sys.executable, __file__, "--variant", str(i), "--seqlens", *map(str, args.seqlens),
                   "--head-dim", str(args.head_dim), "--tokens", str(args.tokens), "--width", str(args.width)]
        try:
            child = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
            found = [json.loads(line[4:]) for line in child.stdout.splitlines() if line.startswith("ROW ")]
            if child.returncode != 0:
                found.append(dict(variant=label(variant), error=f"rc {child.returncode}: "
                                  f"{(child.stderr.strip().splitlines() or [''])[-1][:100]}"))
        except subprocess.TimeoutExpired as expired:
            out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
            found = [json.loads(line[4:]) for line in out.splitlines() if line.startswith("ROW ")]
            found.append(dict(variant=label(variant), error=f"timeout after {args.timeout:.0f} s"))
        for row in found:
            print(row, flush=True)
        rows += found
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(), triton=triton.__version__, rows=rows), f, indent=1)
    print("| variant | seqlen | ms | TFLOP/s (4 matmuls) | max rel err dK / dV |")
    print("|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['variant']} | - | - | {r['error']} | - |")
        else:
            print(f"| {r['variant']} | {r['seqlen']} | {r['ms']:.3f} | {r['tflops']:.1f} | "
                  f"{r['rel_err_dk']:.1e} / {r['rel_err_dv']:.1e} |")


if __name__ == "__main__":
    main()
