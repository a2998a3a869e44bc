#!/usr/bin/env bash
# 2026-12-01 fifth session: the bf16 forward's lazy O rescale (a row maximum moves only when a score exceeds it by
# more than 8 log2 units; Problem::rescale_log2) against variant eager_rescale (moved on every rise, the kernel
# before), same build, same run. Prediction from ncu of d256 512 non-causal (ours 36.7M executed instructions vs
# cuDNN's 26.6M; the O rescale is 128 FMULs per thread per 80-key block at d256, 64 per 128-176 at d128, 32 at d64):
# d256 +5-10% at 512-2048, d128 +2-4%, d64 +1-2%, less at long lengths where maxima settle anyway.
# (1) the forward suite (incl. test_rising_row_maxima); (2) bench_hopper default vs eager_rescale, every head dim and
# length; (3) ncu of the d256 512 non-causal forward on the new default (executed instructions against 36.7M).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-lazyrescale
stamp tests
gpu_pytest tests_hopper.log 200 tests/test_hopper.py
stamp bench
timeout 300 python3 scripts/bench_hopper.py --json "$out/lazy.json" --headdims 64 128 256 \
    --seqlens 512 1024 2048 4096 8192 16384 --variants full eager_rescale --ablation-seqlens > "$out/lazy.log" 2>&1
echo "bench rc $?"; sed -n '/^| hdim/,$p' "$out/lazy.log" | grep -E "^\| [0-9]" | cut -d'|' -f2-8 | paste -sd'\n'
stamp ncu
timeout 60 ncu --clock-control none --set full --import-source no -k regex:flash_fwd_kernel --launch-skip 2 \
    --launch-count 1 -f -o "$out/lazy_d256_512" python3 scripts/hopper_profile_case.py --calls 3 --kernel fwd \
    --headdim 256 --seqlen 512 > "$out/lazy_d256_512.ncu.log" 2>&1
ncu -i "$out/lazy_d256_512.ncu-rep" --page details > "$out/lazy_d256_512.details.txt" 2>&1
rm -f "$out/lazy_d256_512.ncu-rep"
grep -E "^ +(Duration|Executed Instructions  |Issue Slots Busy)" "$out/lazy_d256_512.details.txt" | awk '{$1=$1};1' | paste -sd';'
gpu_archive lazy.tgz
stamp done
