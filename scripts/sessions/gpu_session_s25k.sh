#!/usr/bin/env bash
# 2026-12-04 (twenty-fifth session, review pass): the bitwise and deal tests after their shared runner, on the
# library s25h ran (every unit's SASS identical after the review's kernel refactor). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s25k
stamp tests
gpu_pytest tests_review.log 200 tests/test_hopper_fp8.py tests/test_hopper.py -k "bitwise or tma_store or varlen_on_256 or causal_deals"
grep -E "^(FAILED|ERROR)" "$out/tests_review.log" | head -n 10
stamp done
