#!/usr/bin/env bash
# Prepared in the sixteenth session (2026-12-02; no device could be started in its last hour), for the next session's
# first call (Triton only, no carry). The dV kernel no longer reads delta (kernels._load_row_stats WITH_DELTA: the
# output split's dV kernel compiles differently, not yet run on a GPU), and the opt-in launch.DELTA_BESIDE_DV runs the
# delta kernel on the dQ kernel's stream beside the dV kernel, the dK kernel waiting on its event. bd256 measured the
# delta kernel at 37 us of 884 at 512 (4%): predicted up to +4% at d256 512, less with length; d128 (one dK/dV kernel,
# which reads delta) unchanged. (1) the whole Triton GPU suite (its stream test compares both placements bit for bit
# at d256); (2) the A/B of +delta-beside-dv against the default (delta first on the caller's stream).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s16e
stamp tests
gpu_pytest tests_triton.log 170 tests/test_triton_gpu.py
gpu_ab delta 200 --headdims 256 128 --seqlens 512 1024 2048 16384 --variants pinned+row-stats \
    pinned+row-stats+delta-beside-dv
stamp done
gpu_archive s16e.tar.gz
