#!/usr/bin/env bash
# s49d (branch wip/gqa-parts-kernel, the last ~300 s of device time): the GQA parts GPU tests alone on the kernel
# form (build/s49 in build/s49.tar.xz), then the GQA shapes if time is left.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s49d s49.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s49/libfa3nn_hopper.so
stamp start
gpu_pytest tests_gqa.log 100 tests/test_hopper_bwd.py -k "gqa_parts or unexpanded_kv or gqa_in_kernel"
gpu_log_summary "$out/tests_gqa.log"
stamp tests
timeout 60 python3 scripts/gqa_bwd_shapes.py --json "$out/gqa_bwd.json" > "$out/gqa_bwd.log" 2>&1
echo "gqa rc $?"; grep -E "^\|" "$out/gqa_bwd.log"
stamp gqa
