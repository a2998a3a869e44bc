#!/usr/bin/env bash
# 2026-12-02 (twelfth session), the Triton call of record after the query-major d64 dK/dV kernel: (1) the Triton GPU
# suite; (2) the integrated bench at d64 and d128, triton / cuDNN / FA2, every length (issue 3's table; d256's rows
# are unchanged code: results/triton256final-…-1324); (3) the d128 causal dK/dV sweep at 1024 / 2048 with query-major
# scores against key-major (query-major measured +1.9% at d128 4096 causal).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final12
stamp tests
gpu_pytest tests_triton.log 150 tests/test_triton_gpu.py
stamp bench
timeout 300 python3 scripts/bench.py --backends triton cudnn fa2 --headdims 64 128 --out-dir "$out" --tag final12 \
    --precompile 12 > "$out/bench_final12.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128) " "$out/final12.md" | cut -d'|' -f2-4,5,6,8,9,11,12,14-
for seqlen in 1024 2048; do
    stamp "d128 causal $seqlen"
    for qm in 0 1; do
        FA3NN_TRITON_DKDV_QUERY_MAJOR=$qm timeout 100 python3 -m fa3nn.backends.triton.tune --headdim 128 \
            --seqlen "$seqlen" --causal yes --kinds dkdv --workers 16 --json "$out/d128c_${seqlen}_qm$qm.json" \
            > "$out/d128c_${seqlen}_qm$qm.log" 2>&1
        echo "qm=$qm rc $?"; grep -E "TFLOP" "$out/d128c_${seqlen}_qm$qm.log" | sed 's/ TFLOP\/s//' | paste -sd' ' | fold -w 240
    done
done
stamp done
gpu_archive final12.tar.gz
