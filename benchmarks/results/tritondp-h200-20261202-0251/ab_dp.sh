set -u
source scripts/gpu_env.sh
gpu_setup /tmp/fa3nn-abdp
run() {
    timeout 230 python3 scripts/bench.py --backends triton --headdims 64 128 --seqlens 2048 8192 --directions bwd \
        --precompile 16 --out-dir "$out" --tag "$1" > "$out/$1.log" 2>&1
    echo "$1 rc $?"; grep -E "^\|" "$out/$1.log" | tail -n 8 | cut -d'|' -f2-7
}
stamp early; run dp_early
cp benchmarks/ab/kernels_dp_late.py fa3nn/backends/triton/kernels.py
stamp late; run dp_late
stamp done
