#!/usr/bin/env bash
# Forty-seventh session, second call (same carry as s47a). 1. The dense forward of main (build/dynfinal/, C ABI 6)
# against main before the dynamic deal (build/s46/, ABI 5, from its own source tree build/s46_src/ in its own
# process): the static kernels' SASS moved by 1-8 instructions in 20 of 94; two rounds each, alternated. 2. The
# varlen deals at d128 / d256 with the dynamic deal also over L2-sized sections and one section (whether a wider
# section lets it match the static deal at one length). 3. The uniform-varlen backward rule (ctas -2) against one
# CTA per tile on the same packed call. 4. FP8 training with the default backward_from="quantized" (0ece33b): the
# attention step (forward + backward) against bf16 and against "inputs", and the gradients' SQNR on the kernels.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s47b s47a.tar.xz
root=$PWD
stamp start
for round in 1 2; do
    (cd build/s46_src && PYTHONPATH=$PWD FA3NN_HOPPER_LIB=$root/build/s46/libfa3nn_hopper.so timeout 60 python3 \
        scripts/bench_hopper.py --headdims 64 128 256 --seqlens 512 2048 8192 --reps 3 \
        --json "$out/dense_old_$round.json" > "$out/dense_old_$round.log" 2>&1; echo "old $round rc $?")
    FA3NN_HOPPER_LIB=$root/build/dynfinal/libfa3nn_hopper.so timeout 60 python3 scripts/bench_hopper.py \
        --headdims 64 128 256 --seqlens 512 2048 8192 --reps 3 --json "$out/dense_new_$round.json" \
        > "$out/dense_new_$round.log" 2>&1; echo "new $round rc $?"
done
python3 - "$out" <<'PY'
import json, sys, statistics
out = sys.argv[1]
rows = {}
for tag in ("old", "new"):
    for r in (1, 2):
        try:
            data = json.load(open(f"{out}/dense_{tag}_{r}.json"))
        except Exception as e:
            print("missing", tag, r, e); continue
        for row in data.get("rows", data if isinstance(data, list) else []):
            if row.get("variant") != "full":
                continue
            key = (row["headdim"], row["seqlen"], row["causal"])
            rows.setdefault(key, {}).setdefault(tag, []).append((row["tflops"], row["ratio"]))
print("| hdim | seqlen | causal | old TFLOP/s | new TFLOP/s | new/old | old/cuDNN | new/cuDNN |")
for key in sorted(rows):
    o, n = rows[key].get("old", []), rows[key].get("new", [])
    if o and n:
        to, tn = max(x[0] for x in o), max(x[0] for x in n)
        ro, rn = statistics.median(x[1] for x in o), statistics.median(x[1] for x in n)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {to:.0f} | {tn:.0f} | {tn / to:.3f} | {ro:.3f} | {rn:.3f} |")
PY
stamp dense
export FA3NN_HOPPER_LIB=$root/build/dynfinal/libfa3nn_hopper.so
timeout 90 python3 scripts/fwd_varlen_balance.py --headdims 128 256 --cases 2048 mixed --rounds 2 \
    --variants l2_sections one_section --json "$out/fwd_balance.json" > "$out/fwd_balance.log" 2>&1
echo "fwd balance rc $?"; grep -E "^\| " "$out/fwd_balance.log"
stamp balance
timeout 50 python3 scripts/bwd_varlen_ab.py --headdims 128 64 --varlen-cases 2048 --schedules per_tile --no-triton \
    --rounds 3 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log" | cut -c1-220
stamp "uniform rule"
timeout 60 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --json "$out/fp8_step.json" \
    > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
timeout 60 python3 scripts/fp8_grad_accuracy.py --seqlen 2048 --stds 1 4 16 --json "$out/fp8_grad.json" \
    > "$out/fp8_grad.log" 2>&1
echo "fp8 grad rc $?"; grep -E "^\| [0-9]" "$out/fp8_grad.log"
stamp fp8
gpu_archive s47b.tgz
