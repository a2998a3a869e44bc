#!/usr/bin/env bash
# 2026-12-04 (twenty-eighth session, second call): causal persistent backward launches dealt boustrophedon (compile
# time in the causal kernels, BwdCtaTiles) and auto persistent for causal tiles of <= 4096 query rows
# (use_persistent_bwd). Every native backward test and every backward / gradient test outside it, the schedule A/B
# (per tile x persistent, s28a's shapes), then bench.py's native backward x cuDNN / FA2 as s27e. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s28b
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
gpu_pytest tests_grad.log 200 tests/ -k "backward or grad or bwd or train" --ignore=tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_grad.log" | head -n 12
stamp ab
timeout 200 python scripts/bwd_schedule_ab.py --rounds 5 --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "ab rc $?"; sed -n '/^| d /,$p' "$out/schedule.log"
stamp bench
timeout 330 python scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 --rounds 3 --iters 10 \
    --directions bwd --out-dir "$out" --tag native > "$out/bench_native.log" 2>&1
echo "bench rc $?"; grep -E "^\| (hdim|[0-9]+ )" "$out"/*native*.md | head -n 30
stamp done
