#!/usr/bin/env bash
# Thirty-ninth session, last call: the final library (build/libfa3nn_hopper.so from this checkout: dQ staging without
# bank conflicts for d64 / d128 / MLA, V in registers for the MLA dP^T). Carry build/libfa3nn_hopper.so.
# 1. Nsight Compute's shared-store wavefronts of the d128 backward's dQ staging (2 per STS.64 expected, 4 before).
# 2. bench.py, hopper against cuDNN: MLA at 512 / 2k / 8k / 16k, d64 / d128 at 1k / 4k / 16k.
# 3. Every GPU test ($TEST_WORKERS: 4 on an H100).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s39f
stamp start
workers=8; grep -q H100 "$out/gpu_state.txt" && workers=4
timeout 120 ncu --clock-control none --section SourceCounters --import-source no -k "regex:flash_bwd_kernel" \
    --launch-skip 1 --launch-count 1 -f -o "$out/d128_sts" python3 scripts/hopper_profile_case.py --kernel bwd \
    --seqlen 8192 --calls 2 --headdim 128 > "$out/d128_sts.ncu.log" 2>&1
echo "ncu rc $?"
ncu -i "$out/d128_sts.ncu-rep" --page source --csv --print-source sass > "$out/d128_sts.sass.csv" 2>&1
python3 - "$out/d128_sts.sass.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if "Address" in r)
ix = {h: i for i, h in enumerate(rows[head])}
num = lambda x: float(x.replace(",", "") or 0)
sts = [r for r in rows[head + 1:] if len(r) == len(rows[head]) and "STS.64" in r[ix["Source"]]]
w = sum(num(r[ix["L1 Wavefronts Shared"]]) for r in sts); ideal = sum(num(r[ix["L1 Wavefronts Shared Ideal"]]) for r in sts)
n = sum(num(r[ix["Instructions Executed"]]) for r in sts)
print(f"d128 STS.64: {len(sts)} instructions, {w / max(n, 1):.2f} wavefronts each (ideal {ideal / max(n, 1):.2f})")
PY
stamp ncu
timeout 300 python3 scripts/bench.py --backends hopper cudnn --headdims 192 --headdim-v 128 \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla > "$out/bench_mla.log" 2>&1
echo "bench mla rc $?"; grep -E "^\| [0-9]+" "$out/mla.md"
stamp "bench mla"
timeout 300 python3 scripts/bench.py --backends hopper cudnn --headdims 64 128 --seqlens 1024 4096 16384 \
    --directions bwd --out-dir "$out" --tag d64d128 > "$out/bench_d64d128.log" 2>&1
echo "bench d64/d128 rc $?"; grep -E "^\| [0-9]+" "$out/d64d128.md"
stamp "bench d64/d128"
TEST_WORKERS=$workers gpu_all_tests 330 120
gpu_log_summary "$out/tests_all.log"
stamp tests
