#!/usr/bin/env bash
# 2026-12-03 (nineteenth session), last call: every GPU test on the final native build (the integer row max defaults
# of s19b-s19d), as s17a. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s19f
stamp tests
gpu_all_tests 300 120
stamp done
gpu_archive s19f.tar.gz
