#!/usr/bin/env bash
# 2026-12-03 (twenty-third session), after s23a: the linear exp2 centred (k = round(8 x + 56 - 0.46): the line's
# mean excess over 2^x, 4.07%, taken out, so linear and MUFU scores weigh alike) and with the subnormal line
# (k = round(max(8 x + 55.54, 3 x + 25.83, 0)): CPU emulation put the 4k error growth of the plain line on e4m3's
# subnormal patterns). Accuracy against fp64 and kernel-only rates, d128 256-key kernels: default (45), plain line
# on a quarter / half / all (48-50), the subnormal line on half / all (51, 52). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s23b
v="key_block_256_linear_exp2_quarter key_block_256_linear_exp2_half key_block_256_linear_exp2_all"
v="$v key_block_256_two_line_exp2_half key_block_256_two_line_exp2_all"
stamp bias
timeout 150 python scripts/fp8_accumulation_bias.py --json "$out/bias.json" --headdims 128 --seqlens 4096 16384 \
    --block-k 256 --variants full $v > "$out/bias.log" 2>&1
echo "bias rc $?"; python - "$out/bias.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows if isinstance(rows, list) else rows.get("rows", rows)
for r in rows:
    cells = {k[:-9]: f"{v:.3e}" for k, v in r.items() if k.endswith("_vs_truth")}
    print(r["seqlen"], r["mu"], cells)
PY
stamp rates
gpu_fp8_bench rates 300 --headdims 128 --seqlens 1024 2048 4096 8192 16384 --block-k 256 --reps 7 --variants $v
stamp done
