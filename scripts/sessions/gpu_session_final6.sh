#!/usr/bin/env bash
# 2026-12-01 sixth session: issue 4's table of record on the final forward (fastdiv merged): every GPU test, then one
# scripts/bench.py run of the native forward against cuDNN at the FA3 shapes (d64/128/256, 512-16k, causal and not),
# then the ablation rows (no pingpong / no intra-warpgroup overlap) at 16k non-causal. Carry build/libfa3nn_hopper.so.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-final6
stamp tests
gpu_pytest tests_all.log 200 tests/
stamp bench
timeout 250 python3 scripts/bench.py --backends hopper cudnn --directions fwd --headdims 64 128 256 \
    --out-dir "$out" --tag final6 > "$out/final6.log" 2>&1
echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out/final6.md" | cut -d'|' -f2-9
stamp ablation
timeout 100 python3 scripts/bench_hopper.py --json "$out/ablation.json" --headdims 64 128 256 --seqlens 16384 \
    --ablation-seqlens 16384 > "$out/ablation.log" 2>&1
echo "ablation rc $?"; sed -n '/^| hdim/,$p' "$out/ablation.log" | grep -E "^\| [0-9]" | cut -d'|' -f2-8
gpu_archive final6.tgz
stamp done
