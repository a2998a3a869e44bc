#!/usr/bin/env bash
# 2026-12-04 (twenty-ninth session, seventh call): every GPU test on the final library (varlen backward native, so
# patch_hf's padded / packed batches and every flash_attn_varlen_func training test now run it), failures rerun
# alone. Carry build.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s29g
stamp tests
gpu_all_tests 330 120
stamp done
