#!/usr/bin/env bash
# s54e: the forward's causal deal at few (batch, head) pairs (scripts/fwd_deal_shapes.py). simulate_causal_balance.py
# puts the default one-pair deal at max / mean 1.76 / 1.52 / 1.27 for one 8k sequence x 8 / 16 / 24 heads at d128,
# 1.49 / 1.26 at one 4k x 16 / 24 (d64: 1.42 at one 4k x 16; its 8k calls already deal one section), one section at
# 1.00-1.03. build/s54f = main with the rule that takes one section there (fwd_deal_model.cuh,
# one_section_balances_better, margin 10%); build/s52p = main's kernels before it ("before"). Predicted: default (the
# rule) = one_section, 1.2-1.6x "before" on the few-pair rows if the balance is what they lose; default = before on
# the paper's shapes (2 x 8k x 16, 8 x 2k x 16), where the rule keeps the one-pair deal. Every deal's output is
# compared bitwise with the default's (the deals only reorder tiles); 3 rounds, to fit the session's last device
# minutes.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s54e s54f
python3 -c "import tarfile; tarfile.open('build/s52p.tar.xz').extractall('build')"
timeout 120 python3 scripts/fwd_deal_shapes.py --headdims 128 64 --rounds 3 --compare before=build/s52p/libfa3nn_hopper.so \
    --json "$out/deals.json" > "$out/deals.log" 2>&1
echo "deals rc $?"; grep -E "^\|" "$out/deals.log"; tail -n 3 "$out/deals.log"
stamp deals
