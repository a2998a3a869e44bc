#!/usr/bin/env bash
# s53c: the forward's causal diagonal trim (FA3NN_FWD_DIAG_TRIM, branch wip/fwd-diag-widths; NOTES "s53 offline").
# Carry build/s52p.tar.xz (main's kernels since dbd9970, comments aside) and build/s53t.tar.xz (the trim build, on
# the branch: `python -m fa3nn.backends.hopper_build --define FA3NN_FWD_DIAG_TRIM --out build/s53t/libfa3nn_hopper.so`,
# ~9 min here, then `tar cJf build/s53t.tar.xz -C build s53t/libfa3nn_hopper.so`). Predicted from the GEMM-work
# model (the first block's P V trimmed: 0.91 / 0.93 of the tensor-core work at causal 512, d128 / d256; 0.97 / 0.98
# at 2k): +2-6% at causal 512, +1-2% at 2k, ~0 non-causal and from 8k. d64 (three consumers) is not trimmed in that
# build: its rows are the control (same SASS as main's: expect 1.00 +- the noise). Exactness first: every output
# and lse bitwise main's, or the bench rows mean nothing.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_start /tmp/fa3nn-s53c s52p
python3 -c "import tarfile; tarfile.open('build/s53t.tar.xz').extractall('build')"
timeout 120 python3 scripts/fwd_build_exactness.py --compare build/s53t/libfa3nn_hopper.so > "$out/exact.log" 2>&1
echo "exactness rc $?"; grep -vE "\| 0 \| 0 \|$" "$out/exact.log" | tail -n 20
stamp exactness
timeout 240 python3 scripts/bench_hopper.py --compare trim=build/s53t/libfa3nn_hopper.so --headdims 64 128 256 \
    --seqlens 512 1024 2048 4096 8192 --ablation-seqlens --json "$out/trim.json" > "$out/trim.log" 2>&1
echo "bench rc $?"; grep -E "^\|" "$out/trim.log" | tail -n 64
stamp bench
