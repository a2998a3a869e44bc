#!/usr/bin/env bash
# Thirty-eighth session: the whole GPU suite on the final library (C ABI 4: FwdConfig::kHeadDimV in every forward
# kernel, the MLA forward with its short-call tiles), 4 workers (8 ran the fp32 references out of an H100's memory in
# s37d).
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38d
stamp start
TEST_WORKERS=4 gpu_all_tests 420 100
stamp all
