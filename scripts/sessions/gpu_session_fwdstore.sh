#!/usr/bin/env bash
# 2026-11-30 late night: the forward's O epilogue stored through st.shared (write_o_smem), which changes only the
# d128 128 x 128 / 128 x 160 builds (64 generic ST.E -> STS; the short-call path: causal <= 2048, non-causal <= 512).
# Forward GPU tests, then d128 forward at 512-2048 against the previous build (build/base/) and cuDNN.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-fwdstore
stamp tests
timeout 100 python -m pytest -m gpu -n 8 -q -rfE -p no:cacheprovider tests/test_hopper.py > "$out/tests.log" 2>&1
echo "tests rc $?"; tail -n 3 "$out/tests.log"
stamp bench
timeout 100 python scripts/bench_hopper.py --headdims 128 --seqlens 512 1024 2048 --ablation-seqlens --reps 5 \
    --compare base=build/base/libfa3nn_hopper.so --json "$out/fwd.json" > "$out/bench.log" 2>&1
echo "bench rc $?"; sed -n '/^| /,$p' "$out/bench.log" | tail -n 12
stamp done
gpu_archive fwdstore.tgz
