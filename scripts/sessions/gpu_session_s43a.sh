#!/usr/bin/env bash
# The forty-third session's first call (the forty-second's s42d, which never ran, rebuilt: its branch and libraries
# were lost with that checkout). Carry build/s43a.tar.xz: base/ = main's library (8fa711b), lse/ = d128's backward
# reading its first two lse_log2 pairs before the S^T wait (FA3NN_BWD_LSE_PREFETCH=2, this checkout's default),
# lse4/ = four pairs. First the A/B (decides), then the d128 / MLA tests on lse/ (the candidate for main; MLA and the
# forward are SASS-identical to base/, their tests cover main's host-side choices since s42c), then bench.py's d128
# rows against cuDNN / FA2 for the record.
set -u
python3 -c "import tarfile; tarfile.open('build/s43a.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43a
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
FA3NN_HOPPER_LIB=$PWD/build/base/libfa3nn_hopper.so timeout 60 python3 scripts/bwd_build_ab.py --headdims 128 \
    --seqlens 512 2048 8192 16384 --rounds 5 \
    --compare lse=build/lse/libfa3nn_hopper.so lse4=build/lse4/libfa3nn_hopper.so --json "$out/ab_lse.json" \
    > "$out/ab_lse.log" 2>&1
echo "ab lse rc $?"; grep -E "^\| " "$out/ab_lse.log"
stamp ab
export FA3NN_HOPPER_LIB=$PWD/build/lse/libfa3nn_hopper.so
gpu_pytest tests_lse.log 120 tests/test_hopper_bwd.py tests/test_hopper.py -k "(128 and not 256) or mla"
gpu_log_summary "$out/tests_lse.log"
stamp tests
timeout 120 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 128 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --rounds 2 --out-dir "$out" --tag d128 > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128" "$out/d128.md"
stamp bench
gpu_archive s43a.tgz
