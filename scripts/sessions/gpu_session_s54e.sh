#!/usr/bin/env bash
# s54e: the forward's causal deal at few (batch, head) pairs (scripts/fwd_deal_shapes.py; main's kernels, existing
# variants one_section / l2_sections, no build). simulate_causal_balance.py puts the default one-pair deal at max /
# mean 1.76 / 1.52 / 1.27 for one 8k sequence x 8 / 16 / 24 heads at d128, 1.49 / 1.26 at one 4k x 16 / 24 (d64:
# 1.42 at one 4k x 16; its 8k calls already deal one section), one section at 1.00-1.03. Predicted: one_section
# 1.2-1.6x the default on those rows if the balance is what they lose, ~1.0 or below on the paper's shapes (the
# controls: 2 x 8k x 16, 8 x 2k x 16).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54e s52p
timeout 200 python3 scripts/fwd_deal_shapes.py --headdims 128 64 --json "$out/deals.json" > "$out/deals.log" 2>&1
echo "deals rc $?"; grep -E "^\|" "$out/deals.log"; tail -n 3 "$out/deals.log"
stamp deals
