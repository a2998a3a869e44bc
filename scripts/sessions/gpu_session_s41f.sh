#!/usr/bin/env bash
# Prepared in the forty-first session, not run (device time spent): the MLA forward's causal deal on branch
# wip/mla-causal-deal (flash_fwd_launch.cuh use_one_pair_sections: 192 / 128 as d256, one (batch, head) pair per
# section up to 4096 query rows). Carry build/mlasec.tar.xz: build/libfa3nn_hopper.so (main's library, the baseline)
# and build/mlasec/libfa3nn_hopper.so (the branch's), each built with
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/.../libfa3nn_hopper.so
#   tar cJf build/mlasec.tar.xz -C build libfa3nn_hopper.so mlasec/libfa3nn_hopper.so
# Run it from the branch's checkout. Keep the change if causal 512-4096 gain and nothing loses beyond the spread.
# 1. The MLA forward GPU tests on the new build.  2. bench_hopper.py at 192 / 128, 512-8192, both libraries and cuDNN.
set -u
python3 -c "import tarfile; tarfile.open('build/mlasec.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s41f
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
FA3NN_HOPPER_LIB=$PWD/build/mlasec/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_mla.log 150 \
    tests/test_hopper.py -k "mla"
stamp tests
timeout 240 python3 scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 8192 \
    --reps 5 --compare sections=build/mlasec/libfa3nn_hopper.so --json "$out/mla_fwd.json" > "$out/mla_fwd.log" 2>&1
echo "bench rc $?"; grep -E "^\| " "$out/mla_fwd.log" | head -30
stamp bench
