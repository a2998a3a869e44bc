#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, third call): varlen backward launched one CTA per tile by auto
# (use_persistent_bwd, from s29b). The native backward and hopper API tests again, then the varlen A/B with auto,
# one CTA per tile in both grid orders, MHA and GQA (16 / 4 heads at d128, 32 / 8 at d64). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29c
stamp tests
gpu_pytest tests_bwd.log 240 tests/test_hopper_bwd.py tests/test_hopper.py -k "varlen or backward or auto"
grep -E "^(FAILED|ERROR)" "$out/tests_bwd.log" | head -n 12
stamp ab
for group in 1 4; do
    timeout 200 python scripts/bwd_varlen_ab.py --rounds 5 --varlen-cases mixed short 2048 --group $group \
        --schedules per_tile --json "$out/varlen_g$group.json" > "$out/varlen_g$group.log" 2>&1
    echo "group $group rc $?"; sed -n '/^| d /,$p' "$out/varlen_g$group.log"
done
stamp done
