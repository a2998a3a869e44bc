#!/usr/bin/env bash
# Thirty-eighth session: the multi-head latent attention kernels (q / k 192, v 128) on the H200 (s38e measured them
# on an H100): bench.py's forward and backward rows beside Triton and cuDNN, then the backward's schedules at the
# FA3 shapes (scripts/bwd_schedule_ab.py: per tile, persistent, per tile with key blocks outermost), since causal
# read 0.74-0.82x cuDNN from 2048 on (H100, s38e) while non-causal read 1.29-1.38x; and the overlap variant
# (bulk_dq_overlap: the next step's scores issued behind this step's dK / dV / dQ GEMMs), tests first.
# (Run as is at 17:52 on an H100. The overlap variant measured 0.87-0.98x the plain kernel and was removed after this
# run, so this script's test stage and bwd_schedule_ab's overlap mode no longer exist: NOTES, thirty-eighth session.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38f
stamp start
# the overlap variant's tests first (bulk_dq_overlap at 192 / 128: never run before this call)
gpu_pytest mla_overlap_tests.log 120 tests/test_hopper_bwd.py -k "mla_overlap"
grep -E "^(FAILED|ERROR) " "$out/mla_overlap_tests.log" | head -n 10
stamp tests
timeout 200 python3 scripts/bench.py --backends hopper triton cudnn --headdims 192 --headdim-v 128 \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla_fwdbwd --precompile 12 > "$out/bench_mla.log" 2>&1
echo "bench rc $?"; grep -E "^\| " "$out/mla_fwdbwd.md" | head -n 20
stamp bench
timeout 150 python3 scripts/bwd_schedule_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 8192 16384 --rounds 5 \
    --json "$out/mla_schedule.json" > "$out/mla_schedule.log" 2>&1
echo "schedule rc $?"; grep -E "^\| |main kernel" "$out/mla_schedule.log"
stamp schedule
