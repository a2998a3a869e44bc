#!/usr/bin/env bash
# sm_margin (forty-second session): the library of the checkout it runs in (ABI 5: max_ctas in the forwards) carried as
# build/s42b.tar.xz (smm/libfa3nn_hopper.so, built here with `FA3NN_KERNELS_DIR=kernels/hopper python -m
# fa3nn.backends.hopper_build --out build/smm/libfa3nn_hopper.so`). Stages:
# 1. tests/test_sm_margin.py (grids from a profiler trace, results against margin 0), then every GPU test.
# 2. What a margin costs (scripts/sm_margin_cost.py): d128 forward and backward at 2k / 8k, margins 8 / 16 / 32, and
#    the backward of causal window (1024, 0) at 4k / 16k, which a margin moves from one CTA per tile to persistent.
# 3. use_persistent_bwd's thresholds for d128's new order (FlashAttention-3's, since 286f709): per tile against
#    persistent at 512-8192 (scripts/bwd_schedule_ab.py; the thresholds were measured on the old order, s27d / s28a).
set -u
python3 -c "import tarfile; tarfile.open('build/s42b.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s42b
export FA3NN_HOPPER_LIB=$PWD/build/smm/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_smm.log 120 tests/test_sm_margin.py
gpu_log_summary "$out/tests_smm.log"
stamp "sm_margin tests"
for direction in fwd bwd; do
    timeout 60 python3 scripts/sm_margin_cost.py --direction $direction --headdims 128 --seqlens 2048 8192 \
        --margins 8 16 32 --rounds 5 --json "$out/cost_$direction.json" > "$out/cost_$direction.log" 2>&1
    echo "cost $direction rc $?"; grep -E "^\| " "$out/cost_$direction.log" | head -8
done
timeout 60 python3 scripts/sm_margin_cost.py --direction bwd --window 1024 --headdims 128 --seqlens 4096 16384 \
    --margins 8 32 --rounds 5 --json "$out/cost_window.json" > "$out/cost_window.log" 2>&1
echo "cost window rc $?"; grep -E "^\| " "$out/cost_window.log" | head -6
stamp cost
timeout 90 python3 scripts/bwd_schedule_ab.py --headdims 128 --seqlens 512 1024 2048 4096 8192 --rounds 5 \
    --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "schedule rc $?"; grep -E "^\| |main kernel" "$out/schedule.log"
stamp schedule
gpu_pytest tests_all.log 330 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
gpu_archive s42b.tgz
