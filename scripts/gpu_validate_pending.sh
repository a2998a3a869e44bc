#!/usr/bin/env bash
# What the 2026-11-30 late-afternoon session built without a GPU, validated and timed on one H200 (benchmarks/NOTES.md
# has a section per item: "FP8 varlen: 16-aligned packed vt8", "Bulk dQ", "Overlap", Triton "v3"). Two stages,
# each fits one device call; everything archived under $OUT as pending.tgz (the device tool returns few files).
#   tests  the GPU tests of all three at once: native FP8 (varlen with unaligned starts, dense), the bulk-dQ backward
#          variant and the overlap variants (dK/dV bitwise equal to the default), the Triton FP8 tests (fused pass
#          writes the new vt8 layout) and the whole native backward file; ~4 min with -n 8
#   times  bulk_dq, overlap, bulk_dq_overlap vs red_dq vs Triton vs cuDNN backward (a variant whose error cases fail
#          is left out of the timing); Triton backward tiles and FA3NN_TRITON_UNMASKED_ROW_STATS
#          vs the pinned tiles; native FP8 varlen vs Triton FP8 varlen vs bf16; the fused FP8 quantization pass
#          with the rotation as a fast Walsh-Hadamard transform ("fwht", NOTES "The rotation as a fast
#          Walsh-Hadamard transform") vs tf32x3 vs none; ~8 min (timeouts sum to 585 s)
# Build the library here first: python -m fa3nn.backends.hopper_build --out build/libfa3nn_hopper.so (carry it).
#
#   bash scripts/gpu_validate_pending.sh tests|times
set -u
stage=${1:?tests or times}
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-pending

if [ "$stage" = tests ]; then
    timeout 330 python -m pytest -m gpu -n 8 -v -rfE -p no:cacheprovider tests/test_hopper_fp8.py \
        tests/test_hopper_bwd.py tests/test_fp8_triton_gpu.py tests/test_hopper.py > "$out/tests.log" 2>&1
    echo "tests rc $?"; gpu_log_summary "$out/tests.log"
else
    timeout 260 python scripts/hopper_bwd_device_check.py --variants red_dq bulk_dq overlap bulk_dq_overlap \
        > "$out/bwd.log" 2>&1
    echo "bwd rc $?"; sed -n '/^| hdim/,$p' "$out/bwd.log"
    grep -q '^| hdim' "$out/bwd.log" || grep '^{"headdim"' "$out/bwd.log"  # cut short: the shapes it finished
    timeout 180 python scripts/triton_tile_ab.py --headdims 128 64 --seqlens 2048 8192 --json "$out/triton_ab.json" \
        > "$out/triton_ab.log" 2>&1
    echo "triton tiles rc $?"; tail -n 20 "$out/triton_ab.log"
    timeout 100 python scripts/bench_fp8_varlen.py --json "$out/fp8_varlen.json" > "$out/fp8_varlen.log" 2>&1
    echo "fp8 varlen rc $?"; tail -n 8 "$out/fp8_varlen.log"
    timeout 45 python scripts/bench_fp8_quant.py --headdims 128 256 --seqlens 16384 --precisions tf32x3 fwht \
        --json "$out/fp8_quant.json" > "$out/fp8_quant.log" 2>&1
    echo "fp8 quant rc $?"; sed -n '/^| d | seqlen/,$p' "$out/fp8_quant.log"
    grep -q '^| d | seqlen' "$out/fp8_quant.log" || grep "^{'headdim'" "$out/fp8_quant.log"  # cut short
fi
gpu_archive pending.tgz  # only the archive travels back
