#!/usr/bin/env bash
# Thirty-eighth session, last call: the MLA kernels after the read-back (the column split's score half shared with
# d256 through bwd_cols_probs: the d64 / d128 / d256 backward SASS identical, the MLA kernel's not; one CTA per tile
# always at 192 / 128): their GPU tests, then bench.py's forward and backward rows beside Triton and cuDNN.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38g
stamp start
gpu_pytest mla_tests.log 200 tests/test_hopper_bwd.py tests/test_hopper.py -k "mla or widths or refusal"
grep -E "^(FAILED|ERROR) " "$out/mla_tests.log" | head -n 10
stamp tests
timeout 200 python3 scripts/bench.py --backends hopper triton cudnn --headdims 192 --headdim-v 128 \
    --seqlens 512 2048 8192 16384 --out-dir "$out" --tag mla_fwdbwd --precompile 12 > "$out/bench_mla.log" 2>&1
echo "bench rc $?"; grep -E "^\| " "$out/mla_fwdbwd.md" | head -n 20
stamp bench
