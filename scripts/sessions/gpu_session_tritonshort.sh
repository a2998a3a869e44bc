#!/usr/bin/env bash
# 2026-12-01 (fourth session): Triton tile sweeps at the short lengths where issue 3's 1.2x FA2 is missed (d64
# forward 0.83-0.97x FA2 at 512/1024; d64 backward 0.95-1.00x, d128 backward 0.95-1.10x; the dK/dV tiles up to 1k
# were never measured). fa3nn.backends.triton.tune, one kernel's tile varied at a time (fwd, dK/dV, dQ), causal and
# not; the summary prints, per kernel, the pinned tile's rate and the best one's.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-tritonshort
for hd in 64 128; do
    for seqlen in 512 1024; do
        stamp "d$hd $seqlen"
        gpu_sweep "$hd" "$seqlen" "tune_d${hd}_$seqlen" fwd dkdv dq
    done
done
python3 - "$out" <<'PY'
import json, sys, glob
from fa3nn.backends.triton import configs
for path in sorted(glob.glob(sys.argv[1] + "/tune_*.json")):
    d = json.load(open(path))
    for kind in ("fwd", "dkdv", "dq"):
        for causal in (False, True):
            rows = [r for r in d["results"] if r["kind"] == kind and r["causal"] == causal and "tflops" in r]
            if not rows:
                continue
            pin = configs.pinned(kind, d["headdim"], causal, d["seqlen"])
            pinned = [r for r in rows if configs.Tile(**r["tile"]) == pin]
            best = max(rows, key=lambda r: r["tflops"])
            t = lambda r: "x".join(str(v) for v in r["tile"].values())
            print(f"d{d['headdim']} {d['seqlen']} {kind:4} causal={int(causal)} pinned {'x'.join(str(v) for v in vars(pin).values())} "
                  f"{pinned[0]['tflops'] if pinned else float('nan'):.0f} best {t(best)} {best['tflops']:.0f} "
                  f"| " + " ".join(f"{t(r)}:{r['tflops']:.0f}" for r in rows))
PY
stamp done
