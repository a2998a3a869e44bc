#!/usr/bin/env bash
# The start-of-session device call on one GPU: what is broken and where the time goes, in stages with their own time
# limits (a hang costs only its stage), everything archived as one file under $OUT (the device tool returns few files).
#   1. the GPU suite (all but the native FP8 and native backward tests), verbose so a cut run still names failures
#   2. native FP8 varlen: key lengths multiples of 16 first (aligned vt8 starts), then any lengths
#   3. native backward (draft): per-gradient errors and timing, then its tests, stopping at the first failure
#   4. a training step profile, fa3nn vs SDPA (llama-125m, seqlen 2048)
#   5. the FP8 forward (persistent launch, several tiles per CTA) against one CTA per tile on one shape
#
#   bash scripts/gpu_triage.sh [SUITE_S]
set -u
suite_s=${1:-200}
out=${OUT:-/tmp/fa3nn-triage}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/gpu_state.txt"
stamp() { echo "[$SECONDS s] $*"; }
summary() { echo "  passed $(grep -cE " PASSED" "$1")"; grep -E "(FAILED|ERROR) tests/|^(FAILED|ERROR) " "$1" | head -n 12; }

stamp suite
timeout "$suite_s" python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/ \
    --ignore=tests/test_hopper_fp8.py --ignore=tests/test_hopper_bwd.py > "$out/gpu_tests.log" 2>&1
echo "suite rc $?"; summary "$out/gpu_tests.log"

T=tests/test_hopper_fp8.py
stamp fp8 varlen
timeout 45 python -m pytest -v -p no:cacheprovider "$T" -k "varlen and multiple_of_16" > "$out/fp8_varlen16.log" 2>&1
echo "fp8 varlen (lengths % 16 == 0) rc $?"; summary "$out/fp8_varlen16.log"
timeout 45 python -m pytest -v -x -p no:cacheprovider "$T" -k "varlen and any" > "$out/fp8_varlen_any.log" 2>&1
echo "fp8 varlen (any lengths) rc $?"; summary "$out/fp8_varlen_any.log"

stamp backward
timeout 70 python scripts/hopper_bwd_device_check.py > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; tail -n 25 "$out/bwd_check.log"
timeout 60 python -m pytest -m gpu -v -x -p no:cacheprovider tests/test_hopper_bwd.py > "$out/bwd_tests.log" 2>&1
echo "bwd tests rc $?"; summary "$out/bwd_tests.log"

stamp profile
timeout 100 python scripts/profile_step.py --config llama-125m --out-dir "$out/prof" data.seq_len=2048 \
    run.micro_batch_size=8 > "$out/profile.log" 2>&1
echo "profile rc $?"; tail -n 60 "$out/profile.log"

stamp persistent fp8
timeout 30 python scripts/bench_hopper_fp8.py --headdims 128 --seqlens 2048 --variants one_cta_per_tile \
    --json "$out/fp8_persistent.json" > "$out/fp8_persistent.log" 2>&1
echo "persistent rc $?"; tail -n 6 "$out/fp8_persistent.log"
stamp done
rm -f "$out"/prof/*-trace.json  # tens of MB each; the tables say what is needed
tar czf "$out/triage.tgz" -C "$out" $(cd "$out" && ls | grep -v triage.tgz)
(cd "$out" && ls | grep -v triage.tgz | xargs rm -rf)  # only the archive travels back
