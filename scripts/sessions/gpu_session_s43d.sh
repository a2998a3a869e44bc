#!/usr/bin/env bash
# The MLA backward with 128-key blocks (variant mla_keys, kernels/hopper/flash_bwd_mla_keys.cuh), first run. Carry
# build/s43d.tar.xz: mlak/ = this checkout's library (d64 / d128 / d256 SASS-identical to main's; the 64-key MLA
# kernels scheduled differently, same instruction counts but the causal ones' -16), base/ = main's. First its tests
# (the MLA backward tests with both variants, mla_keys persistent across tiles, the C ABI's checks), stopping there
# if they fail; then the variant A/B against bulk_dq (the 64-key column split) at 512 / 2k / 8k / 16k, causal and
# not; then mla_keys' schedules (one CTA per tile against persistent).
set -u
python3 -c "import tarfile; tarfile.open('build/s43d.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43d
export FA3NN_HOPPER_LIB=$PWD/build/mlak/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_mla.log 150 -x tests/test_hopper_bwd.py -k "mla or c_abi"
gpu_log_summary "$out/tests_mla.log"
stamp tests
if grep -qE "[0-9]+ passed" "$out/tests_mla.log" && ! grep -qE "[0-9]+ (failed|error)" "$out/tests_mla.log"; then
    timeout 110 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --variants bulk_dq mla_keys \
        --compare base=build/base/libfa3nn_hopper.so@bulk_dq --seqlens 512 2048 8192 --rounds 2 \
        --json "$out/ab_mlak.json" > "$out/ab_mlak.log" 2>&1
    echo "ab mlak rc $?"; grep -E "^\| " "$out/ab_mlak.log"
    stamp ab
    [ "$SECONDS" -lt 250 ] && timeout 60 python3 scripts/bwd_schedule_ab.py --headdims 192 --headdim-v 128 --variant mla_keys \
        --seqlens 2048 8192 --rounds 2 --json "$out/sched_mlak.json" > "$out/sched_mlak.log" 2>&1
    echo "sched rc $?"; grep -E "^\| " "$out/sched_mlak.log"
    stamp sched
fi
gpu_archive s43d.tgz
