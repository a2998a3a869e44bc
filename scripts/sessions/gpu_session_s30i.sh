#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, ninth call): s30h hung in every window kernel. Hypothesis: setmaxnreg 32 (producer)
# + 240 (consumers) = 65,536 registers exceeds the 384 x 168 = 64,512 the CTA launched with, so the consumers'
# setmaxnreg.inc waits forever. This build has the window kernels at 24 / 240 (a spilled word in the d128 producer).
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30i
for args in "64 512 512 128 0 1" "128 512 512 128 0 1" "256 512 512 128 0 1" "128 300 1100 100 40 0"; do
  if timeout 25 python scripts/bwd_window_probe.py $args > "$out/p.log" 2>&1; then tail -n 1 "$out/p.log"
  else echo "FAIL $args: $(grep -E 'Error|error' "$out/p.log" | tail -n 1 | cut -c1-150)"; fi
done
