#!/usr/bin/env bash
# Planned for the first GPU call after the thirty-fourth session, from main (carry build): softcap-poly's tanh
# variants against main's library in one call, without checking out the branch (the variants' libraries are ABI 2,
# as main's Python). `native` = build/libfa3nn_hopper.so, main's library (the tree polynomial at d64, the MUFU tanh at
# d128 / d256); build/poly.tar.xz the s33b tree build (the polynomial everywhere), build/pv1-3.tar.xz softcap-poly
# 6635d3a's v1 (four FMNMX chains, degree 6), v2 (four chains, degree 4 on [-0.625, 0.625]) and v3 (v1 with every
# second score of the polynomial path on MUFU). First every softcap GPU test on main's library, then the cap-30 A/B
# (forward and backward, d64 / d128 / d256, windows and the causal call), then cap 2 (the MUFU path) at d128 16k.
# Widen softmax.cuh's tanh_poly_pays where a variant wins (then rebuild and retest). The varlen softcap A/B is
# scripts/sessions/gpu_session_s33c.sh (main's), a call of its own. The thirty-fifth session added the GPU tests of
# FlashAttention-3's seqused and FP8 inputs (tests/test_fa3_compat.py), never run on a GPU yet.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s35a
for t in build/*.tar.xz; do tar xJf "$t" -C build; done  # the carry limit: libraries travel xz-compressed
compare=()
for v in poly v1 v2 v3; do
    [ -f "build/$v/libfa3nn_hopper.so" ] && compare+=(--compare "$v=build/$v/libfa3nn_hopper.so")
done
stamp start
gpu_pytest softcap_tests.log 100 tests/test_hopper_bwd.py tests/test_hopper.py tests/test_dispatch.py -k "softcap"
grep -E "^(FAILED|ERROR) " "$out/softcap_tests.log" | head -n 10
gpu_pytest fa3_compat_tests.log 90 tests/test_fa3_compat.py  # seqused and FP8 inputs on the GPU backends (new)
grep -E "^(FAILED|ERROR) " "$out/fa3_compat_tests.log" | head -n 10
stamp tests
timeout 250 python scripts/window_ab.py --headdims 64 128 256 --directions fwd bwd --flex-headdims --softcap 30 \
    "${compare[@]}" --rounds 3 --json "$out/softcap_ab.json" > "$out/softcap_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap_ab.log"; grep -E "Error" "$out/softcap_ab.log" | head -n 3
stamp ab
timeout 60 python scripts/window_ab.py --headdims 64 128 --seqlens 16384 --lefts 4096 --directions fwd bwd \
    --flex-headdims --softcap 2 "${compare[@]}" --rounds 3 \
    --json "$out/softcap2_ab.json" > "$out/softcap2_ab.log" 2>&1
echo "ab cap 2 rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap2_ab.log"
stamp done
