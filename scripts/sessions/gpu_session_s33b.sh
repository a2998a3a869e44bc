#!/usr/bin/env bash
# Planned for the second GPU call of the thirty-third session: every GPU test on softcap-poly's library (build/poly/:
# bwd-softcap's kernels with tanh_poly and the abs_max tree in the 54 softcap kernels; the other 276 are
# bwd-softcap's instruction for instruction), failures rerun alone; then the cap-30 A/B (forward and backward, d64 /
# d128 / d256, no FlexAttention) with bwd-softcap's library as the `base` column, and cap 2 at d128 16k (scaled
# scores mostly past 1: the MUFU path plus the tree and the vote); with the FA3NN_TANH_POLY_DEGREE=4 measurement
# build (build/poly4.tar.xz) as a `deg4` column when carried. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s33b
for t in build/poly*.tar.xz; do tar xJf "$t" -C build; done  # the carry limit: libraries travel xz-compressed
export FA3NN_HOPPER_LIB=$PWD/build/poly/libfa3nn_hopper.so
compare=(--compare base=build/libfa3nn_hopper.so)
[ -f build/poly4/libfa3nn_hopper.so ] && compare+=(--compare deg4=build/poly4/libfa3nn_hopper.so)
stamp start
TEST_WORKERS=8 RERUN_MAX=150 gpu_all_tests 330 60
stamp tests
timeout 170 python scripts/window_ab.py --headdims 64 128 256 --directions fwd bwd --flex-headdims --softcap 30 \
    "${compare[@]}" --rounds 3 --json "$out/softcap_ab.json" > "$out/softcap_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap_ab.log"; grep -E "Error" "$out/softcap_ab.log" | head -n 3
stamp ab
timeout 50 python scripts/window_ab.py --headdims 128 --seqlens 16384 --lefts 4096 --directions fwd bwd \
    --flex-headdims --softcap 2 "${compare[@]}" --rounds 3 \
    --json "$out/softcap2_ab.json" > "$out/softcap2_ab.log" 2>&1
echo "ab cap 2 rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap2_ab.log"
stamp done
