#!/usr/bin/env bash
# Thirty-ninth session, fourth call: Nsight Compute of one backward launch each (8k, non-causal, paper shapes): the
# MLA kernel (192 / 128) on main's library and with V in registers (build/vregs, this checkout), and d128's for
# comparison; where the MLA step's time goes (s39a-c: removing dQ made it 1.4-1.6x faster, each smaller change
# 0-3%). Carry build/libs3.tar.xz (gpu_session_s39c.sh).
set -u
python3 -c "import tarfile; tarfile.open('build/libs3.tar.xz').extractall('build')"
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39d
stamp start
profile() {  # NAME LIB ARGS...
    local name=$1 lib=$2
    shift 2
    FA3NN_HOPPER_LIB=$lib timeout 170 ncu --clock-control none --set full --import-source no -k "regex:flash_bwd_kernel" \
        --launch-skip 1 --launch-count 1 -f -o "$out/$name" python3 scripts/hopper_profile_case.py --kernel bwd \
        --seqlen 8192 --calls 2 "$@" > "$out/$name.ncu.log" 2>&1
    echo "$name rc $?"
    ncu -i "$out/$name.ncu-rep" --page details > "$out/$name.details.txt" 2>&1
    ncu -i "$out/$name.ncu-rep" --page raw > "$out/$name.raw.txt" 2>&1
    ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/$name.sass.csv" 2>&1
    grep -E "Duration|SM Frequency|Issue Slots Busy|No Eligible|Shared Memory|L1/TEX Hit|Mem Busy|Max Bandwidth" \
        "$out/$name.details.txt" | head -n 12
    grep -E "pipe_(tensor_op_gmma|shared|lsu|fma|alu|xu)[a-z_]*cycles_active.avg.pct_of_peak_sustained_active|data_pipe_lsu_wavefronts_mem_shared.*pct|l1tex__throughput.avg.pct|smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio " \
        "$out/$name.raw.txt" | awk '{print $1, $NF}' | head -n 40
    stamp "$name"
}
profile mla_main "$PWD/build/libfa3nn_hopper.so" --headdim 192 --headdim-v 128
profile mla_vregs "$PWD/build/vregs/libfa3nn_hopper.so" --headdim 192 --headdim-v 128
profile d128_main "$PWD/build/libfa3nn_hopper.so" --headdim 128
