#!/usr/bin/env bash
# Forty-fourth session, second call (main's library, built here and carried as build/s44b.tar.xz = build/main/):
# 1. d256's backward schedules (bwd_schedule_ab.py: one CTA per tile, persistent, key blocks outermost) at 512-8k:
#    use_persistent_bwd's d256 rule (<= 1024 rows non-causal, <= 4096 causal) was measured at d64 / d128 only
#    (s27d / s28a), and d256's causal backward is 0.92-0.99x cuDNN at 512-8k (s43b, H100).
# 2. The whole GPU suite on main's library (s44a's stopped at 99% at its 260 s limit, all passed until then).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44b s44b.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/main/libfa3nn_hopper.so
stamp start
timeout 150 python3 scripts/bwd_schedule_ab.py --headdims 256 --seqlens 512 1024 2048 4096 8192 --rounds 3 \
    --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "schedule rc $?"; grep -E "^\| |main kernel" "$out/schedule.log"
stamp schedule
gpu_pytest tests_all.log 380 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
gpu_archive s44b.tgz
