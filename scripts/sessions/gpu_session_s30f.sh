#!/usr/bin/env bash
# 2026-12-04 (thirtieth session, sixth call): every GPU test on the final library (the native d256 backward is now
# what auto trains head dim 256 on, so every d256 training test of the API, module and integrations runs it; the d64 /
# d128 overlap kernels' SASS moved by a few scheduling lines with the shared consumer's new bases), failures rerun
# alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s30f
stamp tests
gpu_all_tests 420 150
stamp done
