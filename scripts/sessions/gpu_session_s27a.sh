#!/usr/bin/env bash
# 2026-12-04 (twenty-seventh session): the persistent native backward (grid = SMs, each CTA chaining (key block,
# K/V head, batch) tiles, the next tile's K/V loaded after kv_free under the current tile's dQ hand-off and dK / dV
# stores; flash_bwd.cuh BwdCtaTiles). First the new schedule test alone (hang guard + timeout), then every native
# backward test, then the A/B (scripts/bwd_schedule_ab.py: whole backward, 7 interleaved rounds, per-kernel times).
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s27a
stamp schedule-test
gpu_pytest tests_schedule.log 150 tests/test_hopper_bwd.py -k persistent_schedule
grep -E "^(FAILED|ERROR)|Error|assert" "$out/tests_schedule.log" | head -n 12
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
stamp ab
timeout 300 python scripts/bwd_schedule_ab.py --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/schedule.log"
stamp done
