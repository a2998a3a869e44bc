#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, first call): the native backward at head dim 256 (kernels/hopper/flash_bwd_cols.cuh:
# 64-key blocks, the two consumer warpgroups split the head dim, P^T / dS^T through shared memory, dQ by
# red.global.add). Its GPU tests (every native backward test at d256: dense shapes, varlen, GQA, schedules, store
# and pre/postprocess widths), then per tile x persistent, then bench.py's backward rows at d256 against cuDNN, FA2
# and the Triton backward it replaces. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30a
stamp tests
gpu_pytest tests_d256.log 200 tests/test_hopper_bwd.py -k "256"
gpu_log_summary "$out/tests_d256.log"
stamp schedules
timeout 100 python scripts/bwd_schedule_ab.py --headdims 256 --seqlens 512 2048 8192 --rounds 3 --iters 10 \
    --json "$out/sched.json" > "$out/sched.log" 2>&1
echo "sched rc $?"; tail -n 14 "$out/sched.log"
stamp bench
timeout 230 python3 scripts/bench.py --backends hopper triton cudnn fa2 --headdims 256 --directions bwd \
    --out-dir "$out" --tag bench256 --precompile 12 > "$out/bench_bench256.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out/bench256.md"
stamp done
