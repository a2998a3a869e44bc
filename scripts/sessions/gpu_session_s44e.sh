#!/usr/bin/env bash
# Forty-fourth session, fifth call: s44d's library (build/pub/, carried as build/s44d.tar.xz) after the Python fix
# that lets varlen calls at 192 / 128 pick bulk_dq (s44d: hopper_bwd.launch refused every non-default varlen variant,
# so the 16 bulk_dq varlen tests and bwd_varlen_ab.py's bulk_dq row failed before running a kernel).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s44e s44d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/pub/libfa3nn_hopper.so
stamp start
gpu_pytest tests_varlen.log 90 tests/test_hopper_bwd.py -k "mla_varlen"
gpu_log_summary "$out/tests_varlen.log"
stamp tests
timeout 90 python3 scripts/bwd_varlen_ab.py --headdims 192 --headdim-v 128 --varlen-cases 512 2048 mixed short \
    --variants bulk_dq --no-triton --rounds 5 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log"; tail -n 3 "$out/varlen.log"
stamp varlen
gpu_archive s44e.tgz
