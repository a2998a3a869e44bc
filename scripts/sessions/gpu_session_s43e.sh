#!/usr/bin/env bash
# mla_keys as the dense default at 192 / 128 (hopper_bwd.DENSE_DEFAULT_VARIANTS): the MLA backward tests through the
# default (build/s43d.tar.xz's mlak/, the same library as s43d), then bench.py's MLA backward rows against cuDNN.
set -u
python3 -c "import tarfile; tarfile.open('build/s43d.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43e
export FA3NN_HOPPER_LIB=$PWD/build/mlak/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_mla.log 100 tests/test_hopper_bwd.py tests/test_hopper.py -k "mla"
gpu_log_summary "$out/tests_mla.log"
stamp tests
timeout 90 python3 scripts/bench.py --backends hopper cudnn --headdims 192 --headdim-v 128 --directions bwd \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla_bwd > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| 192" "$out/mla_bwd.md"
stamp bench
gpu_archive s43e.tgz
