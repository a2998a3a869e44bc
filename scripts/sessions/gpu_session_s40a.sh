#!/usr/bin/env bash
# Prepared at the end of the thirty-ninth session (NOTES "Next (after the thirty-ninth session)" 2-4). Carry
# build/libs.tar.xz holding this checkout's library (libfa3nn_hopper.so) and its ring-spread measurement build
# (ringspread/libfa3nn_hopper.so), built here and packed:
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so
#   FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --define FA3NN_BWD_RING_SPREAD \
#       --out build/ringspread/libfa3nn_hopper.so
#   tar cJf build/libs.tar.xz -C build libfa3nn_hopper.so ringspread/libfa3nn_hopper.so
# 1. tests/test_kvcache.py's GPU tests (written in s39, never run) and test_fa3_compat's.
# 2. Why d256's ring staging ran 0.88-0.97x with the conflict-free stores (s39e): the A/B again, then Nsight Compute
#    of both at 1k non-causal (the largest gap): stall reasons, shared wavefronts, L2.
# 3. The MLA forward's causal 512 (0.68x cuDNN on the H100): Nsight Compute of ours, d128's and cuDNN's at 512 causal.
# Set TEST_WORKERS=4 when the device is an H100 (done below).
set -u
python3 -c "import tarfile; tarfile.open('build/libs.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s40a
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
# (SKIP_TESTS=1: the fortieth session ran them already, 27 passed on the H100, s40g.)
if [ -z "${SKIP_TESTS:-}" ]; then
    TEST_WORKERS=$workers gpu_pytest tests_kv.log 200 tests/test_kvcache.py tests/test_fa3_compat.py
    stamp tests
fi
timeout 200 python3 scripts/bwd_build_ab.py --headdims 256 --seqlens 1024 4096 --rounds 5 \
    --compare ringspread=build/ringspread/libfa3nn_hopper.so --json "$out/ab_d256.json" > "$out/ab_d256.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_d256.log"
stamp ab
profile() {  # NAME LIB KERNEL-REGEX ARGS...
    local name=$1 lib=$2 regex=$3
    shift 3
    FA3NN_HOPPER_LIB=$lib timeout 120 ncu --clock-control none --set full --import-source no -k "regex:$regex" \
        --launch-skip 1 --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --calls 2 "$@" \
        > "$out/$name.ncu.log" 2>&1
    echo "$name rc $?"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    rm -f "$out/$name.ncu-rep"  # the device tool returns a few files only: keep the text
    grep -E "Duration|L2 Cache Throughput|L1/TEX Cache|DRAM Throughput|Compute \(SM\)|No Eligible|bank" \
        "$out/$name.details.txt" | head -n 9
    stamp "$name"
}
profile d256_main "$PWD/build/libfa3nn_hopper.so" flash_bwd_kernel --kernel bwd --headdim 256 --seqlen 1024
profile d256_spread "$PWD/build/ringspread/libfa3nn_hopper.so" flash_bwd_kernel --kernel bwd --headdim 256 \
    --seqlen 1024
profile mla_fwd_c512 "$PWD/build/libfa3nn_hopper.so" flash_fwd_kernel --kernel fwd --headdim 192 --headdim-v 128 \
    --seqlen 512 --causal
profile d128_fwd_c512 "$PWD/build/libfa3nn_hopper.so" flash_fwd_kernel --kernel fwd --headdim 128 --seqlen 512 --causal
profile cudnn_mla_c512 "$PWD/build/libfa3nn_hopper.so" "cudnn|sm90|fmha" --kernel cudnn --headdim 192 --headdim-v 128 \
    --seqlen 512 --causal
