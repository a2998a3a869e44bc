"""Time cuDNN's FP8 attention forward (cudnn-frontend graph API, `graph.sdpa_fp8`) against fa3nn's native FP8
forward in the same run, on the same e4m3 inputs, at the FlashAttention-3 paper's shapes (batch * seqlen = 16384
tokens, nheads * headdim = 2048). Issue 5's target: fa3nn >= 1.0x cuDNN FP8 forward at head dims 128 and 256 for
seqlen >= 4096. Writes JSON (--json), prints a markdown table last.

NEVER RUN YET (written 2026-11-30 without a GPU): the cuDNN graph calls follow cudnn-frontend 1.32's pybind
signature of sdpa_fp8 (q, k, v, descale_q, descale_k, descale_v, descale_s, scale_s, scale_o, generate_stats,
attn_scale, diagonal_alignment, right_bound) but have not executed; a graph that fails to build is reported as "x"
with cuDNN's reason, not a crash.

Inputs: N(0, 1) bf16 Q, K, V quantized once with one scale per tensor (fa3nn.fp8.quantize.quantize_qkv_tensors with
tensor_scales, laid out (batch, nheads, 1) with block = seqlen for fa3nn; the same scalars, (1, 1, 1, 1), for cuDNN),
as /work/shared/ANCHORS.md's cuDNN FP8 table (per-tensor scales, e4m3 in and out). cuDNN is timed with e4m3 output
(the anchor's setting; scale_o = V's scale, since |O| <= max |V|) and with bf16 output (fa3nn's output type) when
cuDNN builds that graph. scale_s = 448 (P in [0, 1] onto e4m3's range), descale_s = 1/448; Amax_S stays virtual
(cudnn-frontend 1.32 warns that declaring it bars its faster engines), Amax_O is an output.

Checks before timing, per shape: every output (cuDNN's dequantized by scale_o, fa3nn's bf16) against an fp32
attention on the dequantized inputs (fa3nn.testing.reference.attention_ref, head chunks), as SQNR in dB; below
--min-sqnr the row is marked FAIL and the script exits 1 after writing everything.

Timing as scripts/bench_hopper.py's time_interleaved: a CUDA sleep queues the launches, CUDA events around `--iters`
back-to-back calls, in `--reps` rounds of balanced order; medians and the median of the per-round fa3nn / cuDNN ratios.
Both run on torch's current stream (cudnn.set_stream on the handle).

Device command: build the library here (`python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so`),
copy the wheel into .whl/ (git-ignored; /tmp/cudnnfe/ holds it), then one `run` with carry ["build", ".whl"]:

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/nvidia_cudnn_frontend-*.whl &&
    export PYTHONPATH=/tmp/site:$PWD FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so &&
    timeout 500 python3 scripts/bench_cudnn_fp8.py --json $OUT/cudnn_fp8.json 2>&1 | tee $OUT/cudnn_fp8.log

(16 shapes x 3 kernels x (20 iters x 5 reps) plus one fp32 reference per shape: about 2 minutes expected, not
measured; `--seqlens 4096 16384 --causal no` halves it.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hopper import TOKENS, WIDTH, time_interleaved  # noqa: E402

from fa3nn.fp8.quantize import QuantizedQKV, quantize_qkv_tensors  # noqa: E402
from fa3nn.fp8.scaling import E4M3_MAX, amax_to_scale, mean_drift, sqnr_db, tensor_amax  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402

WHEEL = "nvidia_cudnn_frontend-1.32.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
CUDNN_OUTPUTS = ("e4m3", "bf16")


def import_cudnn():
    """The cudnn-frontend python package, or SystemExit naming the wheel to install."""
    try:
        import cudnn
    except ImportError as exc:
        raise SystemExit(
            f"bench_cudnn_fp8: cannot import cudnn ({exc}). Install cudnn-frontend 1.32: python3 -m pip install -q "
            f"--no-index --no-deps --target /tmp/site .whl/{WHEEL} && export PYTHONPATH=/tmp/site:$PWD "
            "(copy the wheel from /tmp/cudnnfe/ into .whl/ first)"
        ) from exc
    return cudnn


def per_tensor_quantize(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> QuantizedQKV:
    """e4m3 Q, K, V with one scale per tensor, descales in fa3nn's (batch, nheads, 1) layout, block = seqlen (so
    fa3nn's kernel reads one scale per (batch, head), all equal)."""
    scales = amax_to_scale(torch.stack([tensor_amax(x) for x in (q, k, v)]))[0]
    return quantize_qkv_tensors(q, k, v, 0, 0, tensor_scales=scales)


def tensor_descales(quantized: QuantizedQKV) -> list[torch.Tensor]:
    """The per-tensor descales of Q, K, V as cuDNN's (1, 1, 1, 1) float32 scalars (the values fa3nn reads)."""
    return [d[:1, :1, :1].reshape(1, 1, 1, 1).contiguous() for d in
            (quantized.q_descale, quantized.k_descale, quantized.v_descale)]


def dequantize(quantized: QuantizedQKV) -> list[torch.Tensor]:
    """fp32 Q, K, V as the kernels see them: x8 * descale (one value per tensor)."""
    return [x.to(torch.float32) * d.reshape(1, 1, 1, 1) for x, d in
            zip((quantized.q, quantized.k, quantized.v), tensor_descales(quantized))]


def reference_out(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                  max_bytes: int = 2 << 30) -> torch.Tensor:
    """fp32 attention (attention_ref, upcast off) over (batch, head-chunk) slices so the score matrix stays under
    max_bytes (seqlen 16384: 1 GiB per head)."""
    from fa3nn.testing.reference import attention_ref

    batch, seqlen, nheads, _ = q.shape
    chunk = max(1, max_bytes // (seqlen * seqlen * 4))
    out = torch.empty_like(q)
    for b in range(batch):
        for h in range(0, nheads, chunk):
            sl = (slice(b, b + 1), slice(None), slice(h, h + chunk))
            out[sl] = attention_ref(q[sl], k[sl], v[sl], causal=causal, softmax_scale=scale, upcast=False)[0]
    return out


def bshd(graph, name: str, shape: tuple[int, ...], data_type):
    """A cuDNN tensor of logical dims (batch, heads, seqlen, d) over fa3nn's (batch, seqlen, heads, d) memory."""
    batch, seqlen, nheads, d = shape
    return graph.tensor(name=name, dim=[batch, nheads, seqlen, d], stride=[seqlen * nheads * d, d, nheads * d, 1],
                        data_type=data_type)


class CudnnFP8:
    """One built cuDNN FP8 SDPA forward graph and its bound buffers; __call__ executes it on torch's stream."""

    def __init__(self, cudnn, handle, quantized: QuantizedQKV, scale: float, causal: bool, out: str,
                 generate_stats: bool):
        q8, k8, v8 = quantized.q, quantized.k, quantized.v
        batch, seqlen, nheads, d = q8.shape
        dt = cudnn.data_type
        out_type = dt.FP8_E4M3 if out == "e4m3" else dt.BFLOAT16
        graph = cudnn.pygraph(io_data_type=out_type, intermediate_data_type=dt.FLOAT, compute_data_type=dt.FLOAT,
                              handle=handle)
        scalars = {name: graph.tensor(name=name, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=dt.FLOAT)
                   for name in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")}
        inputs = {name: bshd(graph, name, x.shape, dt.FP8_E4M3) for name, x in (("q", q8), ("k", k8),
                                                                                        ("v", v8))}
        mask = dict(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0) if causal else {}
        o, stats, _amax_s, amax_o = graph.sdpa_fp8(**inputs, **scalars, generate_stats=generate_stats,
                                                   attn_scale=scale, name="sdpa_fp8", **mask)
        o.set_output(True).set_dim([batch, nheads, seqlen, d]).set_stride(
            [seqlen * nheads * d, d, nheads * d, 1]).set_data_type(out_type)
        amax_o.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(dt.FLOAT)
        self.out = torch.empty(q8.shape, device=q8.device, dtype=torch.float8_e4m3fn if out == "e4m3" else
                               torch.bfloat16)
        amax_buf = torch.zeros(1, 1, 1, 1, device=q8.device, dtype=torch.float32)
        buffers = {o: self.out, amax_o: amax_buf}
        if generate_stats:
            stats.set_output(True).set_dim([batch, nheads, seqlen, 1]).set_stride(
                [nheads * seqlen, seqlen, 1, 1]).set_data_type(dt.FLOAT)
            buffers[stats] = torch.empty(batch, nheads, seqlen, 1, device=q8.device, dtype=torch.float32)
        graph.build([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        descale_q, descale_k, descale_v = tensor_descales(quantized)
        # O is a convex combination of V's rows, so |O| <= max|V| and V's own scale keeps O * scale_o in range.
        self.scale_o = 1.0 / descale_v if out == "e4m3" else torch.ones_like(descale_v)
        one = torch.ones_like(descale_v)
        values = dict(q=q8, k=k8, v=v8, descale_q=descale_q, descale_k=descale_k, descale_v=descale_v,
                      descale_s=one / E4M3_MAX, scale_s=one * E4M3_MAX, scale_o=self.scale_o)
        buffers.update({inputs.get(n, scalars.get(n)): t for n, t in values.items()})
        self.buffers = buffers
        self.workspace = torch.empty(max(1, graph.get_workspace_size()), device=q8.device, dtype=torch.uint8)
        self.graph, self.handle, self.cudnn = graph, handle, cudnn

    def __call__(self) -> torch.Tensor:
        self.cudnn.set_stream(self.handle, torch.cuda.current_stream().cuda_stream)
        self.graph.execute(self.buffers, self.workspace, handle=self.handle)
        return self.out

    def dequantized(self) -> torch.Tensor:
        return self().to(torch.float32) / self.scale_o.reshape(1, 1, 1, 1)


def bench_shape(cudnn, handle, headdim: int, seqlen: int, causal: bool, args) -> dict:
    from fa3nn.backends.hopper_fp8 import fp8_forward
    from fa3nn.fp8.operands import transpose_v
    from fa3nn.masks import Window

    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    v = (v.float() + args.v_mean).to(torch.bfloat16)  # --v-mean: does the kernel keep V's mean over long key ranges?
    quantized = per_tensor_quantize(q, k, v)
    vt8 = transpose_v(quantized.v)
    scale = headdim**-0.5
    window = Window(-1, 0) if causal else Window()
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=causal)
    reference = reference_out(*dequantize(quantized), causal, scale)

    def fa3nn_fp8():
        return fp8_forward(quantized.q, quantized.k, vt8, quantized.q_descale, quantized.k_descale,
                           quantized.v_descale, quantized.block_q, quantized.block_k, scale, window,
                           variant=args.variant)[0]

    fns, sqnr, failed = {"fa3nn": fa3nn_fp8}, {"fa3nn": sqnr_db(fa3nn_fp8(), reference)}, {}
    drift = {"fa3nn": mean_drift(fa3nn_fp8(), reference)} if args.v_mean else {}
    for out in args.cudnn_outputs:
        for train in (False, True) if args.train else (False,):
            name = f"cudnn_{out}" + ("_train" if train else "")
            try:
                graph = CudnnFP8(cudnn, handle, quantized, scale, causal, out, train)
                sqnr[name] = sqnr_db(graph.dequantized(), reference)
                if args.v_mean:
                    drift[name] = mean_drift(graph.dequantized(), reference)
                fns[name] = graph
            except Exception as exc:  # cuDNN refuses some graphs (output type, shape): the row says why
                failed[name] = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]  # cuDNN's reason spans lines
                print(f"d{headdim} {seqlen} causal={causal}: {name} x ({failed[name]})", flush=True)
    del reference
    samples = time_interleaved(fns, args.iters, args.reps)
    ms = {name: statistics.median(s) for name, s in samples.items()}
    ratios = {name: statistics.median(c / f for f, c in zip(samples["fa3nn"], samples[name]))
              for name in samples if name != "fa3nn"}
    return dict(headdim=headdim, seqlen=seqlen, causal=causal, batch=batch, nheads=nheads, ms=ms,
                tflops={name: flops / t / 1e9 for name, t in ms.items()}, fa3nn_over=ratios, sqnr_db=sqnr,
                mean_drift=drift,
                samples_ms=samples, cudnn_failed=failed, ok=all(s >= args.min_sqnr for s in sqnr.values()))


def cell(row: dict, key: str, name: str, fmt: str) -> str:
    if name in row["cudnn_failed"]:
        return "x"
    value = row[key].get(name)
    return "-" if value is None else format(value, fmt)


def print_table(rows: list[dict], names: list[str]) -> None:
    print("| hdim | seqlen | causal | fa3nn TFLOP/s | " + " | ".join(f"{n} TFLOP/s | fa3nn / {n}" for n in names)
          + " | SQNR dB (fa3nn, " + ", ".join(names) + ") | check |")
    print("|---" * (5 + 2 * len(names)) + "|---|")
    for r in rows:
        sq = ", ".join(cell(r, "sqnr_db", n, ".1f") for n in ["fa3nn", *names])
        print(f"| {r['headdim']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | {r['tflops']['fa3nn']:.1f} | "
              + " | ".join(f"{cell(r, 'tflops', n, '.1f')} | {cell(r, 'fa3nn_over', n, '.2f')}" for n in names)
              + f" | {sq} | {'ok' if r['ok'] else 'FAIL'} |")
    for r in rows:
        for name, why in r["cudnn_failed"].items():
            print(f"x: d{r['headdim']} {r['seqlen']} causal={r['causal']} {name}: {why}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--headdims", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--seqlens", type=int, nargs="+", default=[2048, 4096, 8192, 16384])
    parser.add_argument("--causal", choices=("both", "yes", "no"), default="both")
    parser.add_argument("--cudnn-outputs", nargs="+", choices=CUDNN_OUTPUTS, default=list(CUDNN_OUTPUTS),
                        help="cuDNN output types to time (e4m3: the anchor's setting; bf16: fa3nn's output type)")
    parser.add_argument("--train", action="store_true", help="also time cuDNN with softmax stats (generate_stats)")
    parser.add_argument("--variant", default="full",
                        help="fa3nn's FP8 kernel variant (fa3nn.backends.hopper_fp8.VARIANTS), e.g. key_block_192")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--v-mean", type=float, default=0.0,
                        help="add this to every V element (N(0, 1)) and report each kernel's mean drift")
    parser.add_argument("--min-sqnr", type=float, default=20.0,
                        help="dB vs the fp32 reference on the dequantized inputs below which a row is FAIL")
    args = parser.parse_args(argv)
    for s in args.seqlens:
        if s <= 0 or TOKENS % s:
            parser.error(f"--seqlens: {s} must divide {TOKENS} (batch = {TOKENS} // seqlen)")
    cudnn = import_cudnn()
    if not torch.cuda.is_available():
        raise SystemExit("bench_cudnn_fp8: needs a CUDA GPU (Hopper, sm_90); none is visible")
    handle = cudnn.create_handle()
    causals = {"both": (False, True), "yes": (True,), "no": (False,)}[args.causal]
    rows = []
    for headdim in args.headdims:
        for seqlen in args.seqlens:
            for causal in causals:
                rows.append(bench_shape(cudnn, handle, headdim, seqlen, causal, args))
                print(f"d{headdim} {seqlen} {'causal' if causal else 'full'}: {rows[-1]['tflops']} "
                      f"sqnr {rows[-1]['sqnr_db']} mean drift {rows[-1]['mean_drift']}", flush=True)
                args.json.write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                     cudnn_backend=cudnn.backend_version(), rows=rows), indent=1))
                torch.cuda.empty_cache()
    names = [f"cudnn_{o}" + t for o in args.cudnn_outputs for t in (("", "_train") if args.train else ("",))]
    print_table(rows, names)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
