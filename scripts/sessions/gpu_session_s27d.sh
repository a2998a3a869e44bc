#!/usr/bin/env bash
# 2026-12-04 (twenty-seventh session, fourth call): s27c's trace put ~7.8 us per tile (d128; 3.7 at d64) in the
# epilogue, i.e. the dK / dV stores from registers (4 bytes per store, half sectors), a third of a 512-key tile. Now
# the stores go 16 bytes at a time after a quad transpose (BwdConsumer::store_rows). Every native backward test
# (incl. the new store-width test), the A/B (4-byte / 16-byte stores x one CTA per tile / persistent), then the
# trace again through the measurement build. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s27d
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
stamp ab
timeout 300 python scripts/bwd_schedule_ab.py --rounds 5 --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/schedule.log"
stamp trace
timeout 120 python scripts/bwd_trace.py --trace-lib build/trace/libfa3nn_hopper.so --json "$out/trace.json" \
    > "$out/trace.log" 2>&1
echo "trace rc $?"; sed -n '/^| d /,$p' "$out/trace.log"; grep -iE "error|Traceback" "$out/trace.log" | head -5
stamp done
