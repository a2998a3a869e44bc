#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, fourth call): varlen keeps key blocks innermost under causal GQA (s29c). Every
# native backward test and the hopper / dispatch / varlen API tests on the final library, then the varlen A/B with
# auto's choice, MHA and GQA 4 (no explicit schedules). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29d
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
gpu_pytest tests_api.log 240 tests/test_hopper.py tests/test_dispatch.py tests/test_varlen_and_gradcheck.py
grep -E "^(FAILED|ERROR)" "$out/tests_api.log" | head -n 12
stamp ab
for group in 1 4; do
    timeout 150 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases mixed short 2048 --group $group \
        --json "$out/varlen_g$group.json" > "$out/varlen_g$group.log" 2>&1
    echo "group $group rc $?"; sed -n '/^| d /,$p' "$out/varlen_g$group.log"
done
stamp done
