#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, sixth call): the varlen consumers read their tile again for the dK / dV stores
# (bwd_tile_after_loop) instead of keeping the sequence live across the step loop, whose SASS is then the dense
# loop's at d128 (802 / 847 vs 803 / 861 instructions; d64 non-causal still 1167 vs 1026). Every native backward test,
# the varlen API tests, then the varlen A/B with per-kernel times (MHA; GQA 4 without profile). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29f
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py tests/test_hopper.py -k "varlen or backward or auto or bwd"
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
stamp ab
timeout 150 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases mixed short 512 2048 --profile \
    --json "$out/varlen_g1.json" > "$out/varlen_g1.log" 2>&1
echo "g1 rc $?"; sed -n '/^| d /,$p' "$out/varlen_g1.log"; grep "^kernel us" "$out/varlen_g1.log" | sed -E \
    's/flash_bwd_(pre|post)process_vec_kernel/\1/g; s/flash_bwd_kernel/main/g'
timeout 120 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases mixed short 2048 --group 4 \
    --json "$out/varlen_g4.json" > "$out/varlen_g4.log" 2>&1
echo "g4 rc $?"; sed -n '/^| d /,$p' "$out/varlen_g4.log"
stamp done
