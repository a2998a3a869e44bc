#!/usr/bin/env bash
# s49b: the GQA parts GPU test as rewritten after s49a (dQ and whole-group dK / dV by the error-ratio rule, parts'
# dK / dV within the whole groups' error plus half a bf16 ulp per part) and the whole-group GQA test through backward;
# then the MHA backward's schedules at few tiles (scripts/bwd_few_tiles_ab.py: s49a read the MHA kernel at 0.78x cuDNN
# for 8 heads on one causal 8k sequence). Library build/final47/ (main's kernels, C ABI 7) in build/s47d.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s49b s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest gqa_tests.log 150 tests/test_hopper_bwd.py -k "gqa_parts or unexpanded_kv"
gpu_log_summary "$out/gqa_tests.log"
stamp tests
timeout 150 python3 scripts/bwd_few_tiles_ab.py --rounds 5 --json "$out/few_tiles.json" > "$out/few_tiles.log" 2>&1
echo "few tiles rc $?"; grep -E "^\|" "$out/few_tiles.log"
stamp "few tiles"
gpu_archive s49b.tgz
