#!/usr/bin/env bash
# 2026-12-02 (twelfth session): d256 rows issue 3 misses, swept (fa3nn.backends.triton.tune): the forward at 512 and
# 1024 causal (1.00x / 1.18x FA2), the split dK/dV kernel at 2048 (backward 0.85-0.86x FA2; its tiles were never
# swept, only compared two at a time). (As run, the call had its own copy of gpu_sweep with --causal and a 100 s
# limit; gpu_sweep took CAUSAL afterwards.)
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-d256short12
stamp fwd512; CAUSAL=yes gpu_sweep 256 512 fwd256c512 fwd
stamp fwd1024; CAUSAL=yes gpu_sweep 256 1024 fwd256c1024 fwd
stamp split2048; gpu_sweep 256 2048 split256_2048 dkdv_split
stamp done
gpu_archive d256short12.tar.gz
