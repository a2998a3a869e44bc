#!/usr/bin/env bash
# 2026-12-04 (twenty-seventh session, fifth call): the native backward's table against cuDNN and FA2 after the
# 16-byte dK / dV stores and the persistent schedule for short non-causal tiles (auto: flash_bwd_launch.cuh
# use_persistent_bwd), as s26e (bench.py, 3 rounds, d64 / d128, 512-16k); then tests/test_hopper_bwd.py and every
# backward / gradient test outside it (dispatch, module, training paths that run the native backward). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s27e
stamp bench
timeout 330 python scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 --rounds 3 --iters 10 \
    --directions bwd --out-dir "$out" --tag native > "$out/bench_native.log" 2>&1
echo "bench rc $?"; grep -E "^\| (hdim|[0-9]+ )" "$out"/*native*.md | head -n 30
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
gpu_pytest tests_grad.log 200 tests/ -k "backward or grad or bwd or train" --ignore=tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_grad.log" | head -n 12
stamp done
