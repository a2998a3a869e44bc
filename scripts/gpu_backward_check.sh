#!/usr/bin/env bash
# One device call for the native Hopper backward once wired into dispatch: its tests and the API tests that route
# training through it, backward timing against cuDNN and Triton (scripts/hopper_bwd_device_check.py), a training
# step profile fa3nn vs SDPA, and the Triton FP8 drift diagnostic. One archive under $OUT.
#
#   bash scripts/gpu_backward_check.sh
set -u
out=${OUT:-/tmp/fa3nn-bwd-check}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
[ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
stamp() { echo "[$SECONDS s] $*"; }
summary() { echo "  passed $(grep -cE " PASSED" "$1")"; grep -E "(FAILED|ERROR) tests/|^(FAILED|ERROR) " "$1" | head -n 12; }

stamp tests
timeout 120 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_bwd.py tests/test_hopper.py \
    tests/test_dispatch.py tests/test_api.py tests/test_ops_and_compile.py > "$out/tests.log" 2>&1
echo "tests rc $?"; summary "$out/tests.log"; tail -n 1 "$out/tests.log"

stamp backward timing
timeout 100 python scripts/hopper_bwd_device_check.py > "$out/bwd_check.log" 2>&1
echo "bwd check rc $?"; grep -E "FAIL" "$out/bwd_check.log"; sed -n '/^| hdim/,$p' "$out/bwd_check.log"

stamp profile
timeout 100 python scripts/profile_step.py --config llama-125m --out-dir "$out/prof" data.seq_len=2048 \
    run.micro_batch_size=8 > "$out/profile.log" 2>&1
echo "profile rc $?"; grep -E "median step|ms/step|Kernel|kernel<|bwd|Backward|Attention" "$out/profile.log" | cut -c1-150 | head -20

stamp fp8 drift
timeout 60 python scripts/fp8_triton_drift.py > "$out/fp8_drift.log" 2>&1
echo "drift rc $?"; cat "$out/fp8_drift.log" | tail -n 26
stamp done
rm -f "$out"/prof/*-trace.json
tar czf "$out/bwd_check.tgz" -C "$out" $(cd "$out" && ls | grep -v bwd_check.tgz)
(cd "$out" && ls | grep -v bwd_check.tgz | xargs rm -rf)
