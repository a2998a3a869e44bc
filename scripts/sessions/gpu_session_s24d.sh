#!/usr/bin/env bash
# 2026-12-03 (twenty-fourth session): d128's 256-key default now chains its fused turns across tile ends
# (kFusedTurnMmaRowSumCrossTile, variant 54; 45 the kernel before). (1) The inputs on which
# test_key_block_256_matches_its_emulation[768-key_block_256_cross_tile-False] failed twice, run through both
# kernels: bitwise equal, and the emulation check for each. (2) Every FP8 GPU test on the new default. (3) 45 against
# the new default, interleaved (block_k 768), and (4) bench.py --rounds with cuDNN's FP8 beside the default.
# Carry build and .whl.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s24d
export FA3NN_TRITON_AUTOTUNE=0
stamp seed
python - > "$out/seed_check.log" 2>&1 <<'PY'
import sys, zlib, torch
sys.path.insert(0, "tests")
import test_hopper_fp8 as t
node = "tests/test_hopper_fp8.py::test_key_block_256_matches_its_emulation[768-key_block_256_cross_tile-False]"
torch.manual_seed(zlib.crc32(node.encode()))
quantized = t._exact_score_inputs(2, 2000, 1900, 8, 2, 128, block_k=768)
outs = {}
for variant in ("key_block_256_mma_row_sum", "key_block_256_cross_tile", "full"):
    try:
        print(variant, t._run_quantized(quantized, False, 0.25, variant=variant, rms_ratio=t.EXACT_RMS_RATIO,
                                        lse_rtol=t.EXACT_LSE_RTOL))
    except AssertionError as exc:
        print(variant, "FAILED", str(exc).splitlines()[0])
    out = torch.empty(2, 2000, 8, 128, dtype=torch.bfloat16, device="cuda")
    t.fp8_forward(quantized.q, quantized.k, t.transpose_v(quantized.v), quantized.q_descale, quantized.k_descale,
                  quantized.v_descale, 128, 768, 0.25, t.Window(), out=out, variant=variant)
    outs[variant] = out
print("bitwise 45 == 54:", torch.equal(outs["key_block_256_mma_row_sum"], outs["key_block_256_cross_tile"]),
      "54 == full:", torch.equal(outs["key_block_256_cross_tile"], outs["full"]))
PY
cat "$out/seed_check.log" | tail -n 5
stamp tests
gpu_pytest tests_fp8.log 300 tests/ -k "fp8 or FP8"
grep -E "^(FAILED|ERROR)" "$out/tests_fp8.log" | head -n 10
stamp ab
timeout 120 python scripts/bench_hopper_fp8.py --json "$out/ab.json" --headdims 128 --block-k 768 \
    --seqlens 2048 4096 8192 16384 --iters 20 --reps 15 --variants key_block_256_mma_row_sum > "$out/ab.log" 2>&1
echo "ab rc $?"; sed -n '/^| /,$p' "$out/ab.log" | cut -d'|' -f2-7,9
stamp bench
timeout 200 python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --iters 5 --rotate 2 \
    --reps 5 --rounds 7 --out-dir "$out" --tag fp8rounds --headdims 128 --seqlens 2048 4096 8192 16384 \
    > "$out/bench.log" 2>&1
echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/fp8rounds.md | cut -d"|" -f2-4,6,11,14,19,20
stamp cudnn
gpu_cudnn_fp8 100 --headdims 128 --seqlens 4096 8192 16384 --iters 10 --reps 15
stamp done
