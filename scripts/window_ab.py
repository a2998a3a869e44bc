"""Sliding windows: fa3nn's native kernels (FwdConfig::kLocal / BwdConfig::kLocal) against the Triton kernels they
replace and FlexAttention (torch.nn.attention.flex_attention, compiled, a sliding-window block mask), on the same
inputs, rounds interleaved; and, for scale, the native causal kernels of the same shape. TFLOP/s count the pairs each
window attends (fa3nn.metrics.attended_pairs). Shapes of the FlashAttention-3 paper (batch x seqlen = 16384 tokens,
nheads x headdim = 2048), bf16, MHA; windows causal with a left bound (Mistral's / Gemma's local layers). Each
backend's output (and, backward, dq / dk / dv) is compared with the native one's before timing (max |diff|).

    python scripts/window_ab.py --json out.json [--headdims 128 256] [--seqlens 4096 16384] [--lefts 1024 4096]
        [--directions fwd bwd] [--flex-headdims 128] [--compare NAME=PATH]

--softcap C caps every call's scores (FlexAttention's with a score_mod; the Triton causal call joins as a column).
--compare (repeatable) adds another build of the library (hopper_build --define ... --out PATH) as two more columns,
NAME (the window call) and NAME_causal (the causal call, against native_causal).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import TOKENS, WIDTH, time_ms  # noqa: E402

from fa3nn.backends import hopper, hopper_bwd  # noqa: E402
from fa3nn.backends.base import AttnParams  # noqa: E402
from fa3nn.backends.triton import launch as triton_launch  # noqa: E402
from fa3nn.masks import Window  # noqa: E402
from fa3nn.metrics import attention_flops  # noqa: E402


def flex_calls(q, k, v, dout, scale: float, left: int, softcap: float = 0.0):
    """FlexAttention on (b, h, s, d) views with a causal sliding-window block mask (and, softcap > 0, the scores
    capped by a score_mod: cap * tanh(score / cap) of the scaled score): the forward, the backward alone (timed), and
    the output / gradients in fa3nn's (b, s, h, d) layout (checked)."""
    import torch._functorch.config as functorch_config
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # The timed backward re-walks one forward's graph (retain_graph), which compiled graphs with donated buffers
    # refuse (s31b: "compiled with non-empty donated buffers"); donation only lets the backward reuse saved buffers.
    functorch_config.donated_buffer = False
    seqlen = q.shape[1]
    mask = create_block_mask(lambda b, h, i, j: (j <= i) & (i - j <= left), None, None, seqlen, seqlen,
                             device="cuda")
    attend = torch.compile(flex_attention, dynamic=False)
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
    dout_t = dout.transpose(1, 2)
    score_mod = (lambda score, b, h, i, j: softcap * torch.tanh(score / softcap)) if softcap > 0 else None

    def forward():
        return attend(qt, kt, vt, block_mask=mask, scale=scale, score_mod=score_mod)

    graph = {}  # the graph of one forward, made once and walked by every timed backward (retain_graph)

    def backward():
        if "out" not in graph:
            graph["out"] = forward()
        torch.autograd.grad(graph["out"], (qt, kt, vt), dout_t, retain_graph=True)

    def grads():
        o = forward()
        return [g.transpose(1, 2) for g in torch.autograd.grad(o, (qt, kt, vt), dout_t)]

    return forward, backward, lambda: forward().transpose(1, 2), grads


def max_diff(a, b) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b))


def measure(headdim: int, seqlen: int, left: int, direction: str, flex: bool, args, others=()) -> dict:
    batch, nheads = TOKENS // seqlen, WIDTH // headdim
    q, k, v = (torch.randn(batch, seqlen, nheads, headdim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = headdim**-0.5
    cap = args.softcap
    params = AttnParams(softmax_scale=scale, window=Window.from_args(True, (left, 0)), softcap=cap,
                        deterministic=False)
    out, lse = hopper.launch(q, k, v, scale, True, window_size=(left, 0), softcap=cap)
    dout = torch.randn_like(out)
    if direction == "fwd":
        calls = {
            "native": lambda: hopper.launch(q, k, v, scale, True, window_size=(left, 0), softcap=cap),
            "triton": lambda: triton_launch.forward(q, k, v, params, None),
            "native_causal": lambda: hopper.launch(q, k, v, scale, True, softcap=cap),
        }
        if cap > 0:  # the causal call on Triton too: what auto ran softcap on before
            causal_params = AttnParams(softmax_scale=scale, window=Window.from_args(True, (-1, -1)), softcap=cap,
                                       deterministic=False)
            calls["triton_causal"] = lambda: triton_launch.forward(q, k, v, causal_params, None)
        results = {"native": [out], "triton": [triton_launch.forward(q, k, v, params, None)[0]]}
        for name, lib in others:
            calls[name] = functools.partial(hopper.launch, q, k, v, scale, True, window_size=(left, 0), library=lib,
                                            softcap=cap)
            calls[f"{name}_causal"] = functools.partial(hopper.launch, q, k, v, scale, True, library=lib,
                                                        softcap=cap)
            results[name] = [calls[name]()[0]]
    else:
        calls = {
            "native": lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, True, window_size=(left, 0),
                                                softcap=cap),
            "triton": lambda: triton_launch.backward(dout, q, k, v, out, lse, None, params, None),
            # (causal columns: timing only, on the window call's out / lse)
            "native_causal": lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, True, softcap=cap),
            # The window kernels chain no tiles by default (use_persistent_bwd); one CTA per SM chaining them:
            "native_persistent": lambda: hopper_bwd.launch(dout, q, k, v, out, lse, scale, True,
                                                           window_size=(left, 0), schedule="persistent",
                                                           softcap=cap),
        }
        if cap > 0:
            causal_params = AttnParams(softmax_scale=scale, window=Window.from_args(True, (-1, -1)), softcap=cap,
                                       deterministic=False)
            calls["triton_causal"] = lambda: triton_launch.backward(dout, q, k, v, out, lse, None, causal_params,
                                                                    None)
        for name, lib in others:
            calls[name] = functools.partial(hopper_bwd.launch, dout, q, k, v, out, lse, scale, True,
                                            window_size=(left, 0), library=lib, softcap=cap)
            calls[f"{name}_causal"] = functools.partial(hopper_bwd.launch, dout, q, k, v, out, lse, scale, True,
                                                        library=lib, softcap=cap)
        results = {m: calls[m]() for m in calls if not m.endswith("_causal")}
    flex_error = None
    if flex:  # a failure (compile, memory) is recorded and the row goes on without flex
        try:
            fwd, bwd, out_of, grads_of = flex_calls(q, k, v, dout, scale, left, cap)
            results["flex"] = [out_of()] if direction == "fwd" else grads_of()
            call = fwd if direction == "fwd" else bwd
            call(), call()  # what the timing will run, run here first: its failures land in flex_error too
            calls["flex"] = call
        except Exception as error:  # noqa: BLE001
            flex_error = f"{type(error).__name__}: {error}"[:300]
    diffs = {m: max_diff(results["native"], r) for m, r in results.items() if m != "native"}
    samples = {m: [] for m in calls}
    for _ in range(args.rounds):
        for m, c in calls.items():
            samples[m].append(time_ms([c], args.iters, 1))
    flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=True, direction=direction,
                            window=(left, 0))
    causal_flops = attention_flops(batch, nheads, seqlen, seqlen, headdim, causal=True, direction=direction)
    ms = {m: statistics.median(x) for m, x in samples.items()}
    tflops = {m: (causal_flops if m.endswith("_causal") else flops) / ms[m] / 1e9 for m in ms}

    def speedup(base: str, other: str) -> float:  # median over rounds of the round's time ratio
        return statistics.median(t / n for n, t in zip(samples[base], samples[other]))

    ratios = {f"native_over_{m}": speedup("native", m) for m in calls if m != "native" and not m.endswith("_causal")}
    for m in calls:  # the causal calls against the native one: Triton's, the other builds'
        if m.endswith("_causal") and m != "native_causal":
            ratios[f"native_causal_over_{m}"] = speedup("native_causal", m)
    return dict(direction=direction, headdim=headdim, seqlen=seqlen, left=left, ms=ms, samples_ms=samples,
                max_abs_diff=diffs, tflops=tflops, flex_error=flex_error, **ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--headdims", nargs="+", type=int, default=[128, 256])
    parser.add_argument("--seqlens", nargs="+", type=int, default=[4096, 16384])
    parser.add_argument("--lefts", nargs="+", type=int, default=[1024, 4096])
    parser.add_argument("--directions", nargs="+", choices=["fwd", "bwd"], default=["fwd", "bwd"])
    parser.add_argument("--flex-headdims", nargs="*", type=int, default=[128],
                        help="head dims FlexAttention runs at (each shape compiles anew: ~10-30 s)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--softcap", type=float, default=0.0, help="cap every call's scores")
    parser.add_argument("--compare", action="append", default=[],
                        help="NAME=PATH: another build of the library, one more column (repeatable)")
    args = parser.parse_args()
    from fa3nn.backends import hopper_build

    others = [(spec.split("=", 1)[0], hopper_build.load(Path(spec.split("=", 1)[1]))) for spec in args.compare]
    rows = []
    for direction in args.directions:
        for headdim in args.headdims:
            for seqlen in args.seqlens:
                for left in args.lefts:
                    if left < seqlen:
                        rows.append(measure(headdim, seqlen, left, direction, headdim in args.flex_headdims, args,
                                            others))
                        print({k: v for k, v in rows[-1].items() if k != "samples_ms"}, file=sys.stderr, flush=True)
                        if args.json:  # after every row: a run cut short keeps what it measured
                            args.json.write_text(json.dumps(dict(gpu=torch.cuda.get_device_name(), rows=rows),
                                                            indent=1))
    columns = list(dict.fromkeys(m for r in rows for m in r["tflops"]))  # every timed call, first-seen order
    versus = [m for m in columns if m != "native" and not m.endswith("_causal")]
    print("TFLOP/s of the attended pairs (native_causal: of the causal call's); x: native's speed-up over each; "
          "diff: max |native - other|")
    print("| dir | d | seqlen | left | " + " | ".join(columns) + " | " + " | ".join(f"x {m}" for m in versus)
          + " | " + " | ".join(f"diff {m}" for m in versus) + " |")
    print("|---" * (4 + len(columns) + 2 * len(versus)) + "|")
    for r in rows:
        cells = [r["direction"], r["headdim"], r["seqlen"], r["left"]]
        cells += [f"{r['tflops'][m]:.1f}" if m in r["tflops"] else "-" for m in columns]
        cells += [f"{r['native_over_' + m]:.2f}" if "native_over_" + m in r else "-" for m in versus]
        cells += [f"{r['max_abs_diff'][m]:.1e}" if m in r["max_abs_diff"] else "-" for m in versus]
        print("| " + " | ".join(map(str, cells)) + " |")
    causal_rows = [r for r in rows if any(k.startswith("native_causal_over_") for k in r)]
    if causal_rows:  # the causal call, native against Triton's (--softcap) and the other builds' (--compare)
        print("causal call (same shape, no window): TFLOP/s native / other, x native's speed-up")
        for r in causal_rows:
            others_ = [k.removeprefix("native_causal_over_") for k in r if k.startswith("native_causal_over_")]
            print(f"{r['direction']} d{r['headdim']} {r['seqlen']} (row left {r['left']}): native "
                  f"{r['tflops']['native_causal']:.1f}; " + "; ".join(
                      f"{m} {r['tflops'][m]:.1f} x {r['native_causal_over_' + m]:.2f}" for m in others_))


if __name__ == "__main__":
    main()
