set -u
source scripts/gpu_env.sh
gpu_setup /tmp/fa3nn-s21i
export FA3NN_TRITON_AUTOTUNE=0
gpu_pytest triton_gpu.log 280 tests/test_triton_gpu.py tests/test_fp8_triton_gpu.py
grep -E "^(FAILED|ERROR)" "$out/triton_gpu.log" | head -n 10
