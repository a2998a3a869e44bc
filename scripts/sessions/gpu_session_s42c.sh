#!/usr/bin/env bash
# Forty-second session, one device call (failed starts left ~20 minutes, not the two calls s42a + s42b wanted): run
# from a checkout of scratch/merge42 (sm_margin + wip/bwd-fast-exp2 + wip/mla-causal-deal, C ABI 5) carrying
# build/s42c.tar.xz:
#   smm/libfa3nn_hopper.so  wip/sm-margin alone (main's kernels, ABI 5): the base of every A/B below
#   all/libfa3nn_hopper.so  this checkout: sm_margin + the backward's fast_exp2 + MLA's causal one-pair deal
# (each built with `FA3NN_KERNELS_DIR=kernels/hopper python -m fa3nn.backends.hopper_build --out build/X/...`).
# The ABI-4 libraries of s42a (the pre-s41 default for the window re-time) cannot load here: the window / softcap
# rows are absolute (native against Triton), for the docs' figures. Stages in priority order (limits sum to 590 s):
# 1. tests/test_sm_margin.py on all/ (grids from a profiler trace, results against margin 0).
# 2. fast_exp2: bwd_build_ab.py all/ against smm/ at d64 / d128 / d256 and MLA (the forward is the same in both).
# 3. MLA forward causal deal: bench_hopper.py all/ against smm/ with cuDNN (192 / 128, 512-8192).
# 4. Every GPU test on all/.
# 5. sm_margin's cost (d128 forward / backward, causal window backward), d128's persistent thresholds for the FA3
#    order, d128 window / softcap backward against Triton, Nsight Compute of the d128 backward at 8k.
set -u
python3 -c "import tarfile; tarfile.open('build/s42c.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s42c
export FA3NN_HOPPER_LIB=$PWD/build/all/libfa3nn_hopper.so
base=build/smm/libfa3nn_hopper.so
stamp start
export TEST_WORKERS=8; grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
gpu_pytest tests_smm.log 60 tests/test_sm_margin.py
gpu_log_summary "$out/tests_smm.log"
stamp "sm_margin tests"
timeout 55 python3 scripts/bwd_build_ab.py --headdims 64 128 256 --seqlens 512 2048 16384 --rounds 5 \
    --compare base=$base --json "$out/ab_fexp.json" > "$out/ab_fexp.log" 2>&1
echo "ab rc $?"; grep -E "^\| " "$out/ab_fexp.log"
timeout 30 python3 scripts/bwd_build_ab.py --headdims 192 --headdim-v 128 --seqlens 2048 16384 --rounds 5 \
    --compare base=$base --json "$out/ab_fexp_mla.json" > "$out/ab_fexp_mla.log" 2>&1
echo "ab mla rc $?"; grep -E "^\| " "$out/ab_fexp_mla.log"
stamp "fexp ab"
timeout 50 python3 scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 8192 \
    --reps 5 --compare base=$base --json "$out/mla_fwd.json" > "$out/mla_fwd.log" 2>&1
echo "mla bench rc $?"; grep -E "^\| " "$out/mla_fwd.log" | head -24
stamp mla
gpu_pytest tests_all.log 230 tests/
gpu_log_summary "$out/tests_all.log"
stamp "all tests"
for direction in fwd bwd; do
    timeout 25 python3 scripts/sm_margin_cost.py --direction $direction --headdims 128 --seqlens 2048 8192 \
        --margins 8 32 --rounds 3 --json "$out/cost_$direction.json" > "$out/cost_$direction.log" 2>&1
    echo "cost $direction rc $?"; grep -E "^\| " "$out/cost_$direction.log" | head -8
done
timeout 20 python3 scripts/sm_margin_cost.py --direction bwd --window 1024 --headdims 128 --seqlens 4096 16384 \
    --margins 8 32 --rounds 3 --json "$out/cost_window.json" > "$out/cost_window.log" 2>&1
echo "cost window rc $?"; grep -E "^\| " "$out/cost_window.log" | head -6
stamp cost
timeout 30 python3 scripts/bwd_schedule_ab.py --headdims 128 --seqlens 512 1024 2048 4096 8192 --rounds 3 \
    --json "$out/schedule.json" > "$out/schedule.log" 2>&1
echo "schedule rc $?"; grep -E "^\| |main kernel" "$out/schedule.log"
stamp schedule
timeout 25 python3 scripts/window_ab.py --headdims 128 --seqlens 4096 16384 --lefts 1024 --directions bwd \
    --flex-headdims --json "$out/win.json" > "$out/win.log" 2>&1
echo "win rc $?"; grep -E "^\| " "$out/win.log" | head -8
stamp windows
timeout 40 ncu --clock-control none --set full --import-source no -k "regex:flash_bwd_kernel" --launch-skip 1 \
    --launch-count 1 -f -o "$out/d128_fa3order" python3 scripts/hopper_profile_case.py --kernel bwd --headdim 128 \
    --seqlen 8192 --calls 2 > "$out/d128_fa3order.ncu.log" 2>&1
echo "ncu rc $?"
ncu -i "$out/d128_fa3order.ncu-rep" --page details > "$out/d128_fa3order.details.txt" 2>&1
ncu -i "$out/d128_fa3order.ncu-rep" --page source --csv --print-source sass > "$out/d128_fa3order.sass.csv" 2>&1
rm -f "$out/d128_fa3order.ncu-rep"
grep -E "Duration|Compute \(SM\)|No Eligible|highest-utilized" "$out/d128_fa3order.details.txt" | head -n 6
stamp ncu
gpu_archive s42c.tgz
