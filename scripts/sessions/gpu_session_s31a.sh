#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, first call): the bwd-window branch's library (window kernels at 32 / 232
# registers, 9a87b43, never run on the GPU): probes first (one process each, 25 s cap, so a hang costs 25 s), then the
# native-vs-Triton window A/B, then every GPU test (the 90 window cases included), failures rerun alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31a
fails=0
for args in "64 512 512 128 0 1" "128 512 512 128 0 1" "256 512 512 128 0 1" "128 300 1100 100 40 0"; do
  if timeout 25 python scripts/bwd_window_probe.py $args > "$out/p.log" 2>&1; then tail -n 1 "$out/p.log"
  else fails=$((fails + 1)); echo "FAIL $args: $(grep -E 'Error|error' "$out/p.log" | tail -n 1 | cut -c1-150)"; fi
done
stamp probes
[ "$fails" -gt 0 ] && exit 1
timeout 150 python scripts/window_ab.py --directions bwd --flex-headdims --headdims 64 128 256 --json "$out/window_ab.json" > "$out/window_ab.log" 2>&1
echo "ab rc $?"; grep -E "^\| [0-9]" "$out/window_ab.log"
stamp ab
gpu_all_tests 280 80
stamp done
