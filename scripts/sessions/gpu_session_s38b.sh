#!/usr/bin/env bash
# Thirty-eighth session: the native forward at multi-head latent attention's head dims (q / k 192, v 128;
# kernels/hopper/flash_fwd_d192.cu; carry build/libfa3nn_hopper.so, C ABI 4). Its GPU tests (test_hopper.py -k mla:
# every shape and head layout, the tile / row-max variants, varlen, sinks, training through auto), then the variants
# against cuDNN at the FA3 shapes (bench_hopper.py: 128 x 128 with integer or float row maxima, 128 x 96 with Q
# double-buffered); bench.py's rows beside Triton and cuDNN in s38c.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s38b
stamp start
# with the sinks tests s38a had planned (the Triton sinks never ran on a GPU)
gpu_pytest mla_tests.log 240 tests/test_hopper.py tests/test_fa3_compat.py -k "mla or refusal or sinks"
grep -E "^(FAILED|ERROR) " "$out/mla_tests.log" | head -n 10
stamp tests
timeout 200 python scripts/bench_hopper.py --headdims 192 --headdim-v 128 --seqlens 512 1024 2048 4096 8192 16384 \
    --variants full tiles_a int_max float_max --ablation-seqlens --experiment-headdims --reps 5 \
    --json "$out/mla_variants.json" > "$out/mla_variants.log" 2>&1
echo "variants rc $?"; grep -E "^\| " "$out/mla_variants.log"
stamp variants
