#!/usr/bin/env bash
# In-kernel GQA/MQA for the native backward (benchmarks/NOTES.md, "In-kernel GQA/MQA for the native backward"),
# validated and timed on one H200 in one device call (~3-6 min; tests time out at 300 s, the check at 200 s):
#   1. the GPU tests of tests/test_hopper_bwd.py: the new GQA/MQA ones (all four variants, d64/d128, causal or not,
#      against the reference; dK/dV bitwise run to run, across variants and across grid orders; backward() with
#      NATIVE_GQA on) and the existing MHA ones (the walk and the grid order touch every kernel);
#   2. scripts/hopper_bwd_gqa_check.py: error cases, then in-kernel GQA vs the expansion path vs MHA at the same FLOPs
#      vs cuDNN, bwd TFLOP/s, table last; JSON in $OUT.
# Build the library here first: python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so (carry build).
#
#   bash scripts/gpu_check_bwd_gqa.sh
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-bwd-gqa
xdist=$(python -c "import xdist" 2>/dev/null && echo "-n 8")
timeout 300 python -m pytest -m gpu $xdist -v -rfE -p no:cacheprovider tests/test_hopper_bwd.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
timeout 200 python scripts/hopper_bwd_gqa_check.py > "$out/gqa.log" 2>&1
echo "gqa check rc $?"
grep -E "FAIL" "$out/gqa.log" | head -n 10
sed -n '/^| hdim/,$p' "$out/gqa.log"
grep -q '^| hdim' "$out/gqa.log" || tail -n 20 "$out/gqa.log"  # cut short or crashed: what it printed last
