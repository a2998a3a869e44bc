#!/usr/bin/env bash
# 2026-12-02 (twelfth session): the rows issue 3 still misses, swept (fa3nn.backends.triton.tune, whole backward,
# the library's orientation choice): d64 512 causal (1.19x FA2) dK/dV and dQ tiles, d128 512 causal (0.94x FA2) dK/dV
# and dQ tiles, d128 16384 non-causal (0.66x cuDNN) dK/dV tiles. (As run, the call had its own copy of gpu_sweep
# with --causal and a 120 s limit; gpu_sweep took CAUSAL afterwards.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-short12
stamp d64; CAUSAL=yes gpu_sweep 64 512 d64c512 dkdv dq
stamp d128; CAUSAL=yes gpu_sweep 128 512 d128c512 dkdv dq
stamp d128nc; CAUSAL=no gpu_sweep 128 16384 d128nc16k dkdv
stamp done
gpu_archive short12.tar.gz
