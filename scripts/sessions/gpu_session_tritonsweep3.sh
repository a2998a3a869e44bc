#!/usr/bin/env bash
# 2026-12-01 (fourth session): (1) the Triton GPU suite on the 4-warp d64 tiles up to 4k; (2) sweeps where the
# 4-warp tiles were not tried: d64 8192 (forward, dK/dV) and d128 2048 / 8192 (dK/dV, dQ), whole-kernel timing
# with the other kernels pinned.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-tritonsweep3
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
for case in "64 8192 fwd dkdv" "128 2048 dkdv dq" "128 8192 dkdv dq"; do
    set -- $case
    stamp "sweep d$1 $2"
    gpu_sweep "$1" "$2" "tune_d$1_$2" "${@:3}"
done
stamp done
