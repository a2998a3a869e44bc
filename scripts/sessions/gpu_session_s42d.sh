#!/usr/bin/env bash
# Prepared in the forty-second session for the next one's first call (no device start came). Main's library as
# landed (sm_margin, the backward's fast_exp2, MLA's causal one-pair deal up to 2048 rows, d128's persistent thresholds
# for the FA3 order; device code SASS-identical to s42c's all/), carried as build/s42d.tar.xz (final42/). The d128
# backward's and the MLA forward's tests (the host-side changes since s42c pick among schedules and deals s42c's suite
# ran); then branch wip/bwd-stat-prefetch (lse/ in the same tarball: d128's first two lse_log2 pairs read before the
# S^T wait; lse4/: four, built with --define FA3NN_BWD_LSE_PREFETCH=4) against main's library at d128, and the 2-pair
# build's d128 tests; last (if the device time lasts), bench.py's d128 backward rows against cuDNN / FA2 for the
# record (the MLA forward's are s42c's bench_hopper rows).
set -u
python3 -c "import tarfile; tarfile.open('build/s42d.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s42d
export FA3NN_HOPPER_LIB=$PWD/build/final42/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_final.log 100 tests/test_hopper_bwd.py tests/test_hopper.py -k "(128 and not 256) or mla"
gpu_log_summary "$out/tests_final.log"
stamp tests
if [ -f build/lse/libfa3nn_hopper.so ]; then
    timeout 45 python3 scripts/bwd_build_ab.py --headdims 128 --seqlens 512 2048 16384 --rounds 5 \
        --compare lse=build/lse/libfa3nn_hopper.so lse4=build/lse4/libfa3nn_hopper.so --json "$out/ab_lse.json" \
        > "$out/ab_lse.log" 2>&1
    echo "ab lse rc $?"; grep -E "^\| " "$out/ab_lse.log"
    FA3NN_HOPPER_LIB=$PWD/build/lse/libfa3nn_hopper.so gpu_pytest tests_lse.log 50 tests/test_hopper_bwd.py \
        -k "matches_reference and 128 and not 256 and not mla"
    gpu_log_summary "$out/tests_lse.log"
    stamp lse
fi
timeout 80 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 128 --directions bwd \
    --seqlens 512 2048 8192 16384 --rounds 2 --out-dir "$out" --tag bwd128 > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| 128" "$out/bwd128.md"
stamp bench
gpu_archive s42d.tgz
