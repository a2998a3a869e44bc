#!/usr/bin/env bash
# 2026-12-01 (second session): FP8 d128 with 192-key blocks (variant key_block_192: K boxes of 192 rows, Vt in three
# 64-key SW64 panels, S = m64n192k32, P V in six k32 steps; one k/v descale per 192 keys). (1) test_hopper_fp8
# (the new key_block_192 tests against the emulation with block_n = 192, and everything else: the default kernels
# are SASS-identical); (2) kernel-only timing against the default on the same inputs (block_k 384 serves both),
# with both skeletons (softmax skipped: timing only); (3) per-tensor scales against cuDNN FP8, default and 192.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-kb192
gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
stamp tests
timeout 120 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py > "$out/tests.log" 2>&1
echo "tests rc $?"; gpu_log_summary "$out/tests.log"
stamp fp8
timeout 200 python3 scripts/bench_hopper_fp8.py --json "$out/fp8.json" --headdims 128 \
    --seqlens 2048 4096 8192 16384 --reps 6 --iters 10 --block-k 384 \
    --variants key_block_192 skip_softmax key_block_192_skip_softmax > "$out/fp8.log" 2>&1
echo "fp8 rc $?"; sed -n '/^| hdim/,$p' "$out/fp8.log"
stamp cudnn
for v in full key_block_192; do
  timeout 100 python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8_$v.json" --headdims 128 \
      --seqlens 4096 8192 16384 --cudnn-outputs e4m3 --variant $v --reps 4 > "$out/cudnn_fp8_$v.log" 2>&1
  echo "cudnn $v rc $?"; grep -E '^\| 128 ' "$out/cudnn_fp8_$v.log"
done
stamp done
gpu_archive kb192.tgz
