#!/usr/bin/env bash
# 2026-12-02 (sixteenth session): the delta kernel on the dQ kernel's stream beside the output split's dV kernel
# (launch.DELTA_BESIDE_DV; the dV kernel no longer reads delta, the dK kernel waits on its event). bd256 measured the
# delta kernel at 37 us of 884 at 512 (4%), so the prediction is up to +4% at d256 512, less with length; d128 (one
# dK/dV kernel, which reads delta) should be unchanged. (1) the GPU tests on streams, graphs and the output split;
# (2) the A/B against +delta-first (delta first on the caller's stream, as before).
set -u
source "$(dirname "$0")/gpu_env.sh"
gpu_setup /tmp/fa3nn-s16e
stamp tests
gpu_pytest tests_streams.log 120 tests/test_triton_gpu.py -k "second_stream or graph or output_split"
gpu_ab delta 200 --headdims 256 128 --seqlens 512 1024 2048 16384 --variants pinned+row-stats \
    pinned+row-stats+delta-first
stamp done
gpu_archive s16e.tar.gz
