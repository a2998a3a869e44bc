#!/usr/bin/env bash
# Planned for the first GPU call after the thirty-second session (which had no GPU): softcap in the native backward
# (BwdConfig::kSoftcap, branch bwd-softcap; compiled and checked offline only). A one-test probe first (60 s cap: a
# hang costs a minute), then every softcap test (backward against the reference dense / varlen at cap 5 and 50, the
# auto path native both ways, dispatch), then the backward A/B at cap 30 against Triton and FlexAttention (score_mod
# tanh), windows (1024, 0) / (4096, 0) and, as native_causal / triton_causal, the causal call. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s33a
stamp start
timeout 60 python -m pytest -q -x -p no:cacheprovider tests/test_hopper_bwd.py \
    -k "test_softcap_backward_matches_reference and bfloat16 and 128 and 4q4kv and causal_w-1_-1 and 1000x1000" \
    > "$out/probe.log" 2>&1
echo "probe rc $?"; tail -n 2 "$out/probe.log"
stamp probe
gpu_pytest softcap_tests.log 200 tests/test_hopper_bwd.py tests/test_hopper.py tests/test_dispatch.py -k "softcap"
grep -E "^(FAILED|ERROR) " "$out/softcap_tests.log" | head -n 10
stamp tests
timeout 200 python scripts/window_ab.py --headdims 64 128 256 --directions bwd --flex-headdims 128 --softcap 30 \
    --json "$out/softcap_bwd_ab.json" > "$out/softcap_bwd_ab.log" 2>&1
echo "ab rc $?"; sed -n '/^TFLOP/,$p' "$out/softcap_bwd_ab.log"; grep -E "Error" "$out/softcap_bwd_ab.log" | head -n 3
stamp done
