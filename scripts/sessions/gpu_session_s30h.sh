#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, eighth call): s30g's window kernels failed with "unspecified launch failure". One
# call per process over head dims, lengths and windows to see which fail, then compute-sanitizer on the first failure.
# Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30h
first=""
for d in 64 128 256; do
  for case in "128 128 -1 5 0" "512 512 128 0 1" "512 512 128 -1 0" "512 512 -1 64 0" "300 1100 100 0 1"; do
    if timeout 60 python scripts/bwd_window_probe.py $d $case > "$out/p.log" 2>&1; then tail -n 1 "$out/p.log"
    else echo "FAIL d$d $case: $(grep -E 'Error|error' "$out/p.log" | tail -n 1 | cut -c1-150)"; [ -z "$first" ] && first="$d $case"; fi
  done
done
if [ -n "$first" ]; then
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  echo "sanitizer on: $first"
  timeout 150 "$SAN" --tool memcheck --show-backtrace no python scripts/bwd_window_probe.py $first > "$out/san.log" 2>&1
  echo "san rc $?"; grep -E "Invalid|Error|at 0x|by thread|Address|=========" "$out/san.log" | head -n 20
fi
