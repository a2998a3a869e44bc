#!/usr/bin/env bash
# 2026-12-01 (fourth session): (1) the Triton GPU suite on the 4-warp d64 tiles up to 4k; (2) sweeps where the
# 4-warp tiles were not tried: d64 8192 (forward, dK/dV) and d128 2048 / 8192 (dK/dV, dQ), whole-kernel timing
# with the other kernels pinned.
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-tritonsweep3
stamp tests
timeout 150 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_triton_gpu.py > "$out/tests_triton.log" 2>&1
echo "tests rc $?"; tail -n 2 "$out/tests_triton.log"
sweep() {  # headdim seqlen kinds...
    local hd=$1 seqlen=$2; shift 2
    stamp "sweep d$hd $seqlen"
    timeout 150 python3 -m fa3nn.backends.triton.tune --headdim $hd --seqlen $seqlen --kinds "$@" --tma auto \
        --workers 16 --json "$out/tune_d${hd}_$seqlen.json" > "$out/tune_d${hd}_$seqlen.log" 2>&1
    echo "rc $?"; grep -E "TFLOP" "$out/tune_d${hd}_$seqlen.log" | sed 's/ tma=[a-z0-9]*//; s/ TFLOP\/s//; s/causal=/c/' \
        | paste -sd' ' | fold -w 240
}
sweep 64 8192 fwd dkdv
sweep 128 2048 dkdv dq
sweep 128 8192 dkdv dq
stamp done
