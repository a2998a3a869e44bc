#!/usr/bin/env bash
# 2026-12-04 (twenty-seventh session, sixth call): every GPU test on the final library (the persistent backward by
# default for short non-causal tiles, 16-byte dK / dV stores), failures rerun alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s27f
stamp tests
gpu_all_tests 300 120
stamp done
