#!/usr/bin/env bash
# Forty-sixth session, last call (~6 minutes of device time left): main after merging the varlen forward's dynamic
# deal with auto's choice (static where every sequence has one length), library build/dynfinal/ (main's kernels),
# carried as build/s46c.tar.xz. 1. The forward's varlen / deal tests. 2. fwd_varlen_balance.py at d128 / d256, 2048
# / mixed (auto should read as static at 2048 and as dynamic on mixed lengths), with the dynamic deal also over
# L2-sized sections and one section (--variants: whether a wider section lets the dynamic deal match the static one
# at one length, so auto could deal dynamically everywhere). 3. The uniform-varlen backward rule (ctas -2)
# against one CTA per tile on the same packed call (bwd_varlen_ab.py --schedules per_tile, d128 2048).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s46c s46c.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/dynfinal/libfa3nn_hopper.so
stamp start
gpu_pytest tests_varlen.log 80 tests/test_hopper.py -k "varlen or deal"
gpu_log_summary "$out/tests_varlen.log"
stamp tests
timeout 80 python3 scripts/fwd_varlen_balance.py --headdims 128 256 --cases 2048 mixed --rounds 2 \
    --variants l2_sections one_section \
    --json "$out/fwd_balance.json" > "$out/fwd_balance.log" 2>&1
echo "fwd balance rc $?"; grep -E "^\| " "$out/fwd_balance.log"
stamp balance
timeout 50 python3 scripts/bwd_varlen_ab.py --headdims 128 64 --varlen-cases 2048 --schedules per_tile --no-triton \
    --rounds 3 --json "$out/varlen.json" > "$out/varlen.log" 2>&1
echo "varlen rc $?"; grep -E "^\| " "$out/varlen.log" | cut -c1-220
stamp "uniform rule"
gpu_archive s46c.tgz
