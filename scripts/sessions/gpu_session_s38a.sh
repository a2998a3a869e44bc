#!/usr/bin/env bash
# Prepared at the end of the thirty-seventh session for the next one's first GPU call (carry build/libfa3nn_hopper.so,
# built from this checkout's kernels: C ABI 3). The Triton sinks (kernels._with_sink, launch.backward's sinks
# gradient) never ran on a GPU: their GPU tests (tests/test_fa3_compat.py test_sinks_gpu[triton] among the sinks
# tests), then scripts/fa3_compat_bench.py with --backend triton (sinks / plain, causal and window 128; before the
# fusion the one-pass correction cost the native path 1.10-1.46x causal and 2.3-2.9x window 128 forward, s37a) and
# the native rows beside it; then the whole GPU suite with 4 workers (8 ran the fp32 references out of an H100's
# memory in s37d).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38a
stamp start
gpu_pytest sinks_tests.log 200 tests/test_fa3_compat.py tests/test_hopper.py -k "sinks"
grep -E "^(FAILED|ERROR) " "$out/sinks_tests.log" | head -n 10
stamp tests
for backend in triton hopper; do
    timeout 150 python scripts/fa3_compat_bench.py --backend $backend --json "$out/fa3_compat_$backend.json" \
        > "$out/fa3_compat_$backend.log" 2>&1
    echo "$backend rc $?"; tail -n 5 "$out/fa3_compat_$backend.log"
    stamp "$backend"
done
TEST_WORKERS=4 gpu_all_tests 330 90
stamp all
