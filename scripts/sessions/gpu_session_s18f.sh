#!/usr/bin/env bash
# 2026-12-03 (eighteenth session), sixth and seventh calls (the second with the max read off P after the exp2s): the speculative max's common path timed (variant
# key_block_256_lag_max: exp2s on the previous blocks' running max, the max tree beside them, rows whose max rose by
# more than P's headroom scaled after) beside the same kernel with its max tree (key_block_256_fused_turn) and
# without any (…_skip_row_max, WRONG output), and the default (split S). The SQNR of each against the bf16 kernel
# says whether the lagging max costs accuracy (the default's ~25.5 dB). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s18f
stamp native
gpu_fp8_bench lagmax 200 --headdims 128 --seqlens 2048 4096 8192 16384 --block-k 256 --reps 5 \
    --variants key_block_256_split_s key_block_256_fused_turn key_block_256_fused_turn_skip_row_max \
    key_block_256_lag_max
python - "$out/lagmax.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["seqlen"], r["causal"], {k: round(v, 2) for k, v in r["sqnr_vs_bf16_db"].items()})
PY
stamp done
gpu_archive s18f.tar.gz
