#!/usr/bin/env bash
# Owed from the forty-eighth session (NOTES "Next 0"): on main's code (d172420), every GPU test (the whole suite last
# ran in s48a, before the restore pass and the eager FP8 path), fp8_train_step at 2k / 8k both masks, the host
# profile, and the uniform-varlen backward rule against one CTA per tile where the card is an H200 (s47b's H100 read
# -2.4..+1.5%, s45l's H200 +4-6.5%). First the GQA / MQA backward at model shapes (scripts/gqa_bwd_shapes.py). Library build/final47/ (main's kernels, C ABI 7) in build/s47d.tar.xz.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s49a s47d.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/final47/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
timeout 120 python3 scripts/gqa_bwd_shapes.py --json "$out/gqa_bwd.json" > "$out/gqa_bwd.log" 2>&1
echo "gqa rc $?"; grep -E "^\|" "$out/gqa_bwd.log"; tail -n 3 "$out/gqa_bwd.log" | grep -v "^|"
stamp gqa
gpu_pytest tests_all.log 330 tests/
gpu_log_summary "$out/tests_all.log"
stamp tests
timeout 100 python3 scripts/fp8_train_step.py --headdims 128 --seqlens 2048 8192 --causal both --reps 3 \
    --json "$out/fp8_step.json" > "$out/fp8_step.log" 2>&1
echo "fp8 step rc $?"; grep -E "^\| [0-9]" "$out/fp8_step.log"
stamp "fp8 step"
timeout 60 python3 scripts/fp8_host_profile.py --seqlen 2048 --iters 30 --top 30 > "$out/host_profile.log" 2>&1
echo "profile rc $?"; grep -A31 "^=== " "$out/host_profile.log" | cut -c1-150 | head -70
stamp profile
if grep -q H200 "$out/gpu_state.txt"; then
    timeout 90 python3 scripts/bwd_varlen_ab.py --headdims 128 64 --varlen-cases 2048 --schedules per_tile --no-triton \
        --rounds 3 --json "$out/varlen_rule.json" > "$out/varlen_rule.log" 2>&1
    echo "varlen rule rc $?"; grep -E "^\|" "$out/varlen_rule.log" | tail -n 12
    stamp "varlen rule"
fi
gpu_archive s49a.tgz
