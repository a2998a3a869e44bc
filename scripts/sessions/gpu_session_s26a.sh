#!/usr/bin/env bash
# 2026-12-04 (twenty-sixth session): FP8 variant 57 (key_block_256_early_exp2: d128's 256-key default with each
# block's first key half turned into P between the two Q K^T halves' waits, where the other warpgroup is in its turn
# and MUFU idles; rows whose max the second half raises get that half's P rescaled). Tests (its emulation, varlen,
# against the default), the traced per-block phases beside the default, timed beside the default (interleaved, 15
# reps), and issue 5's rows (bench.py) with it. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s26a
stamp tests
gpu_pytest tests_early.log 200 tests/test_hopper_fp8.py -k "early_exp2 or varlen_on_256 or key_block_256_matches"
grep -E "^(FAILED|ERROR)|assert" "$out/tests_early.log" | head -n 12
stamp trace
for args in "16384 0 57 1" "16384 0 0 1" "4096 1 57 1" "4096 1 0 1"; do
    echo "== fp8_trace $args"
    timeout 60 build/fp8_trace $args 2>&1 | grep -E "TFLOP/s|wg [01]:|fit over|tile-end turn"
done | tee "$out/trace.log"
stamp ab
timeout 240 python scripts/bench_hopper_fp8.py --json "$out/early.json" --headdims 128 --block-k 768 \
    --seqlens 1024 2048 4096 8192 16384 --iters 20 --reps 15 --variants key_block_256_early_exp2 > "$out/early.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/early.log" | cut -d'|' -f2-5,9
python3 - "$out/early.json" <<'PY'
import json, statistics, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    s = r["samples_ms"]
    ratios = sorted(a / b for a, b in zip(s["fp8"], s["fp8_key_block_256_early_exp2"]))
    print(r["seqlen"], "causal" if r["causal"] else "non-causal", "default / early time, median %.4f (%.4f-%.4f)"
          % (statistics.median(ratios), ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]))
PY
stamp done
