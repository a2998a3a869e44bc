#!/usr/bin/env bash
# 2026-12-04 (thirty-first session, eighth call): softcap in the native forward (FwdConfig::kSoftcap, branch
# fwd-softcap; tanh as 1 - 2 / (2^(2x log2 e) + 1), the Triton kernels' formula): the softcap tests (forward against the
# reference, the auto path: native forward + Triton backward), then the forward A/B with cap 30 (windows and, as
# native_causal / triton_causal, the causal call). Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s31h
stamp start
gpu_pytest softcap_tests.log 150 tests/test_hopper.py -k "softcap"
grep -E "^(FAILED|ERROR) " "$out/softcap_tests.log" | head -n 10
stamp tests
timeout 120 python scripts/window_ab.py --headdims 64 128 256 --directions fwd --flex-headdims --softcap 30 \
    --json "$out/softcap_ab.json" > "$out/softcap_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap_ab.log"; grep -E "Error" "$out/softcap_ab.log" | head -n 3
python - "$out/softcap_ab.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    t = r["tflops"]
    print(r["headdim"], r["seqlen"], r["left"], "causal native / triton %.1f / %.1f" % (t["native_causal"], t["triton_causal"]),
          "x %.2f" % r["native_causal_over_triton_causal"])
PY
stamp done
