#!/usr/bin/env bash
# For the next session's first device call (prepared in the forty-first; NOTES "Next (after the forty-first
# session)"): everything the forty-first left unmeasured, in one call (its stages' limits sum to 585 s; the
# forty-first's runs of the same scripts took 10-30 s each). Carry build/s42a.tar.xz:
#   old/libfa3nn_hopper.so     main at 93234ba (d128's backward default bulk_dq_overlap), the library before s41
#   cand/libfa3nn_hopper.so    main since 286f709 (d128's default bulk_dq in FlashAttention-3's order)
#   fexp/libfa3nn_hopper.so    branch wip/bwd-fast-exp2
#   mlasec/libfa3nn_hopper.so  branch wip/mla-causal-deal
# (built here with `FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/X/...` from a
# worktree of each revision; tar cJf build/s42a.tar.xz -C build old cand fexp mlasec.) Run from main's checkout.
# 1. d128's window and softcap backward, the new default (cand) against the old (window_ab.py --compare).
# 2. wip/bwd-fast-exp2: its backward GPU tests, then bwd_build_ab.py against cand at d64 / d128 / d256 / MLA.
# 3. wip/mla-causal-deal: the MLA forward tests, then bench_hopper.py against cand with cuDNN (192 / 128, 512-8192).
# 4. Nsight Compute of the new d128 default (below). Everything is archived into s42a.tgz (the tool returns few files).
set -u
python3 -c "import tarfile; tarfile.open('build/s42a.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s42a
export FA3NN_HOPPER_LIB=$PWD/build/cand/libfa3nn_hopper.so
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
timeout 90 python3 scripts/window_ab.py --headdims 128 --seqlens 4096 16384 --lefts 1024 4096 --directions bwd \
    --flex-headdims --compare old=build/old/libfa3nn_hopper.so --json "$out/win.json" > "$out/win.log" 2>&1
echo "win rc $?"; grep -E "^\| " "$out/win.log" | head -12
timeout 45 python3 scripts/window_ab.py --headdims 128 --seqlens 4096 --lefts 1024 --directions bwd --softcap 30 \
    --flex-headdims --compare old=build/old/libfa3nn_hopper.so --json "$out/cap.json" > "$out/cap.log" 2>&1
echo "cap rc $?"; grep -E "^\| " "$out/cap.log" | head -8
stamp windows
FA3NN_HOPPER_LIB=$PWD/build/fexp/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_fexp.log 100 \
    tests/test_hopper_bwd.py
stamp "fexp tests"
timeout 90 python3 scripts/bwd_build_ab.py --headdims 64 128 256 --seqlens 512 2048 16384 --rounds 5 \
    --compare fexp=build/fexp/libfa3nn_hopper.so --json "$out/ab_fexp.json" > "$out/ab_fexp.log" 2>&1
echo "ab rc $?"; grep -E "^\| |main kernel" "$out/ab_fexp.log"
timeout 45 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 16384 --rounds 5 \
    --compare fexp=build/fexp/libfa3nn_hopper.so --json "$out/ab_fexp_mla.json" > "$out/ab_fexp_mla.log" 2>&1
echo "ab mla rc $?"; grep -E "^\| " "$out/ab_fexp_mla.log"
stamp "fexp ab"
FA3NN_HOPPER_LIB=$PWD/build/mlasec/libfa3nn_hopper.so TEST_WORKERS=$workers gpu_pytest tests_mla.log 60 \
    tests/test_hopper.py -k "mla"
timeout 80 python3 scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 8192 \
    --reps 5 --compare sections=build/mlasec/libfa3nn_hopper.so --json "$out/mla_fwd.json" > "$out/mla_fwd.log" 2>&1
echo "mla bench rc $?"; grep -E "^\| " "$out/mla_fwd.log" | head -24
stamp mla
# 4. Nsight Compute of the new d128 default at 8k non-causal (s39d's profile of the old one is the comparison): stall
#    reasons, shared wavefronts, tensor pipe; the text kept, the report dropped (the device tool returns a few files).
FA3NN_HOPPER_LIB=$PWD/build/cand/libfa3nn_hopper.so timeout 75 ncu --clock-control none --set full --import-source no \
    -k "regex:flash_bwd_kernel" --launch-skip 1 --launch-count 1 -f -o "$out/d128_fa3order" \
    python3 scripts/hopper_profile_case.py --kernel bwd --headdim 128 --seqlen 8192 --calls 2 \
    > "$out/d128_fa3order.ncu.log" 2>&1
echo "ncu rc $?"
ncu -i "$out/d128_fa3order.ncu-rep" --page details > "$out/d128_fa3order.details.txt" 2>&1
ncu -i "$out/d128_fa3order.ncu-rep" --page source --csv --print-source sass > "$out/d128_fa3order.sass.csv" 2>&1
rm -f "$out/d128_fa3order.ncu-rep"
grep -E "Duration|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\)|No Eligible|highest-utilized" \
    "$out/d128_fa3order.details.txt" | head -n 8
stamp ncu
gpu_archive s42a.tgz
