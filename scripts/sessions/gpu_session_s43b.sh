#!/usr/bin/env bash
# The forty-third session's record call: bench.py's hopper / cuDNN / FA2 rows at head dims 64 and 256 and MLA (192 /
# 128), forward and backward, causal and not, 512 / 2k / 8k / 16k (s43a's d128 lengths), on main's library as it stands
# after s43a (carry build/s43b.tar.xz: lib/). The README's status table mixes H200 rows with H100 ones since the thirty-
# eighth session; these (with s43a's d128 rows) refresh it from one library on one card. Then Nsight Compute of cuDNN's
# MLA backward beside ours (causal 8k, where ours runs 0.83-0.85x cuDNN on the H100): cuDNN's launch shape (grid,
# threads, registers, shared memory) says which tile layout it chose, and the pipe / shared-memory / L2 figures where
# the difference goes (our step is estimated at ~350 KB of shared-memory traffic per 64 x 64 step: NOTES s43).
set -u
python3 -c "import tarfile; tarfile.open('build/s43b.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s43b
export FA3NN_HOPPER_LIB=$PWD/build/lib/libfa3nn_hopper.so
stamp start
for d in 64 256; do
    timeout 120 python3 scripts/bench.py --backends hopper cudnn fa2 --headdims $d --directions fwd bwd \
        --seqlens 512 2048 8192 16384 --out-dir "$out" --tag d$d > "$out/bench_d$d.log" 2>&1
    echo "bench d$d rc $?"; grep -E "^\| $d" "$out/d$d.md"
    stamp "d$d"
done
timeout 120 python3 scripts/bench.py --backends hopper cudnn --headdims 192 --headdim-v 128 --directions fwd bwd \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla > "$out/bench_mla.log" 2>&1
echo "bench mla rc $?"; grep -E "^\| 192" "$out/mla.md"
stamp mla
for who in cudnn-bwd bwd; do
    timeout 120 ncu --clock-control none --set full --import-source no --nvtx --nvtx-include "profiled/" \
        -f -o "$out/ncu_$who" python3 scripts/hopper_profile_case.py --kernel $who --headdim 192 --headdim-v 128 \
        --seqlen 8192 --causal --calls 2 > "$out/ncu_$who.log" 2>&1
    echo "ncu $who rc $?"
    ncu -i "$out/ncu_$who.ncu-rep" --page details > "$out/ncu_$who.details.txt" 2>&1
    ncu -i "$out/ncu_$who.ncu-rep" --page raw > "$out/ncu_$who.raw.txt" 2>&1
    grep -E "^  [a-zA-Z_].*\(|Duration|Registers Per|Block Size|Grid Size|Shared Memory Config|Dynamic Shared" \
        "$out/ncu_$who.details.txt" | head -n 40
    pipes="sm__pipe_(tensor_op_gmma|shared|fma|xu)[a-z_]*cycles_active.avg.pct_of_peak_sustained_active"
    banks="l1tex__data_bank_(reads|writes).avg.pct_of_peak_sustained_elapsed"
    grep -E "^  [a-zA-Z_].*\(|$pipes|$banks|lts__t_sectors.avg.pct_of_peak_sustained_elapsed" \
        "$out/ncu_$who.raw.txt" | head -n 30
done
stamp ncu
gpu_archive s43b.tgz
