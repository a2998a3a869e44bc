# Sourced (not run) by the scripts/gpu_*.sh and scripts/sessions/gpu_session_*.sh device scripts: what every one
# of them does around its own stages.
#   gpu_setup DEFAULT_OUT [TARBALL]  $out = $OUT or DEFAULT_OUT, created; the carried build/TARBALL (.tar.xz)
#                          unpacked into build/; PYTHONPATH with this checkout first, unbuffered Python,
#                          FA3NN_HOPPER_LIB when build/libfa3nn_hopper.so was carried; the GPU's clocks and
#                          temperature into $out/gpu_state.txt; TEST_WORKERS, unless set, 4 on an H100 (see
#                          gpu_pytest), else 8
#   gpu_start DEFAULT_OUT NAME  gpu_setup DEFAULT_OUT NAME.tar.xz with FA3NN_HOPPER_LIB its build/NAME/ library,
#                          then the start stamp and the GPU's state printed (the session scripts' preamble)
#   gpu_unpack NAME...     each carried build/NAME.tar.xz unpacked into build/ (libraries compared beside gpu_start's)
#   gpu_wheels TARGET GLOB  the carried wheels matching .whl/GLOB installed into TARGET (no index, no dependencies),
#                          TARGET put first on PYTHONPATH; a failed install is printed, not fatal
#   gpu_table NAME LIMIT SCRIPT ARGS...  python3 SCRIPT --json $out/NAME.json ARGS into $out/NAME.log within LIMIT
#                          seconds; prints its exit code, its markdown table's rows and its last non-table lines
#                          (scripts/bwd_schedule_grid.py, scripts/gqa_bwd_shapes.py)
#   gpu_tests LOG LIMIT ARGS...  gpu_pytest, then gpu_log_summary of its log
#   gpu_log_summary LOG    a pytest -v log's PASSED count, its first 15 failures/errors and its last line
#   gpu_archive NAME       everything in $out into $out/NAME (tar.gz) and the rest deleted: the device tool returns
#                          only a few files
#   stamp TEXT             "[<seconds since the script started> s] TEXT": where a call's time went
#   gpu_pytest LOG LIMIT ARGS...  `pytest -m gpu` with $TEST_WORKERS workers (default 8; 4 on an H100, whose 80 GB
#                          the largest fp32 references of 8 outgrow: s37d, s38g) on ARGS into $out/LOG within LIMIT
#                          seconds; prints its exit code and the last two lines
#   gpu_ncu_pages NAME     the report $out/NAME.ncu-rep's details, raw metrics and SASS source (per-instruction samples)
#                          pages into $out/NAME.{details.txt,raw.txt,sass.csv}
#   gpu_ncu_fp8 NAME VARIANT LIMIT  Nsight Compute (--set full) of one FP8 forward launch (d128, 16k, K/V tiles of 384
#                          rows, benchmark VARIANT) into $out/NAME.*: details, SASS csv and raw metrics; prints the
#                          headline figures and the pipe utilizations
#   gpu_ab NAME LIMIT ARGS...  scripts/triton_tile_ab.py (16 compile workers, 5 timing rounds unless ARGS say) into
#                          $out/NAME.{json,log} within LIMIT seconds; prints its exit code and its table compactly
#   gpu_bench TAG LIMIT ARGS...  scripts/bench.py, triton / cuDNN / FA2 (12 compile workers), into $out/TAG.{json,md}
#                          and $out/bench_TAG.log within LIMIT seconds; prints its exit code and its table's rows
#   gpu_bench_rows LIMIT   the native bf16 record table: scripts/bench.py, hopper / cuDNN / FA2 at the paper's shapes
#                          (d64 / d128 / d256, forward and backward, 512 / 2k / 8k / 16k, causal and not) into
#                          $out/rows.{json,md} and $out/bench_rows.log within LIMIT seconds; prints its exit code and
#                          rows
#   gpu_all_tests LIMIT RERUN_LIMIT  every GPU test (pytest -m gpu, $TEST_WORKERS workers, default 8) into
#                          $out/tests_all.log within LIMIT seconds, then its failures (up to $RERUN_MAX, default 40)
#                          rerun alone into $out/rerun.log within RERUN_LIMIT (12 workers sharing the GPU ran the fp32
#                          references out of memory: 8 failures in s31a, 86 in s31b; 8 workers none, 141-145 s)
#   gpu_fp8_bench NAME LIMIT ARGS...  scripts/bench_hopper_fp8.py ARGS (the native FP8 forward and its --variants,
#                          kernel only) into $out/NAME.{json,log} within LIMIT seconds; prints its exit code and table
#   gpu_fp8_record LIMIT ARGS...  issue 5's table: scripts/bench.py with the native FP8 forward, our bf16 forward and
#                          cuDNN (forward only, 5 iterations, inputs rotated) with ARGS (--headdims, --seqlens,
#                          --reps) into $out/fp8record.{json,md} and $out/bench.log; prints its exit code and rows
#   gpu_cudnn_fp8 LIMIT ARGS...  cuDNN's FP8 forward beside ours (scripts/bench_cudnn_fp8.py ARGS, e4m3 output) into
#                          $out/cudnn_fp8.{json,log} within LIMIT seconds, the cudnn-frontend wheel from .whl installed
#                          for it and removed after; prints its exit code and the table's first columns
#   gpu_sweep D SEQLEN STEM KINDS...  fa3nn.backends.triton.tune at head dim D, SEQLEN, for KINDS into
#                          $out/STEM.{json,log} (CAUSAL=yes|no|both, default both); prints its exit code and the
#                          results folded onto a few lines
gpu_setup() {
    out=${OUT:-$1}
    mkdir -p "$out"
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    [ -n "${2:-}" ] && gpu_unpack "${2%.tar.xz}"
    [ -f build/libfa3nn_hopper.so ] && export FA3NN_HOPPER_LIB=$PWD/build/libfa3nn_hopper.so
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$out/gpu_state.txt"
    if [ -z "${TEST_WORKERS:-}" ]; then
        export TEST_WORKERS=8
        grep -q H100 "$out/gpu_state.txt" && export TEST_WORKERS=4
    fi
    return 0
}

gpu_start() {
    gpu_setup "$1" "$2.tar.xz"
    export FA3NN_HOPPER_LIB=$PWD/build/$2/libfa3nn_hopper.so
    stamp start
    cat "$out/gpu_state.txt"
}

gpu_unpack() {
    local name
    for name in "$@"; do
        python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall('build')" "build/$name.tar.xz"
    done
}

gpu_wheels() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$1" .whl/$2 \
        > "$out/pip.log" 2>&1 || echo "wheel install failed: $(tail -n 2 "$out/pip.log")"
    export PYTHONPATH=$1:$PYTHONPATH
}

gpu_log_summary() {
    echo "  passed $(grep -cE " PASSED" "$1")"
    grep -E "(FAILED|ERROR) tests/|^(FAILED|ERROR) " "$1" | head -n 15
    tail -n 1 "$1"
}

gpu_archive() {
    tar czf "$out/$1" -C "$out" $(cd "$out" && ls | grep -vx "$1")
    (cd "$out" && ls | grep -vx "$1" | xargs rm -rf)
}

stamp() { echo "[$SECONDS s] $*"; }

gpu_pytest() {
    local log=$1 limit=$2
    shift 2
    timeout "$limit" python -m pytest -m gpu -n "${TEST_WORKERS:-8}" -q -rfE -p no:cacheprovider "$@" > "$out/$log" 2>&1
    echo "$log rc $?"; tail -n 2 "$out/$log"
}

gpu_tests() {
    gpu_pytest "$@"
    gpu_log_summary "$out/$1"
}

gpu_ncu_pages() {
    ncu -i "$out/$1.ncu-rep" --page details > "$out/$1.details.txt" 2>&1
    ncu -i "$out/$1.ncu-rep" --page raw > "$out/$1.raw.txt" 2>&1  # pipe utilizations: MUFU (xu), FMA, tensor
    ncu -i "$out/$1.ncu-rep" --page source --csv --print-source sass > "$out/$1.sass.csv" 2>&1
}

gpu_ncu_fp8() {
    timeout "$3" ncu --clock-control none --set full --import-source no -k "regex:flash_fwd_fp8_kernel" \
        --launch-skip 2 --launch-count 1 -f -o "$out/$1" python3 scripts/hopper_profile_case.py --kernel fp8 \
        --headdim 128 --block-k 384 --variant "$2" > "$out/$1.ncu.log" 2>&1
    echo "$1 rc $?"
    gpu_ncu_pages "$1"
    grep -E "Duration|SM Frequency|Issue Slots Busy|Executed Ipc A|No Eligible|Tensor" "$out/$1.details.txt" | head -n 8
    grep -E "sm__pipe_(xu|fma|alu|tensor_op_gmma|shared)[a-z_]*cycles_active.avg.pct_of_peak_sustained_active" \
        "$out/$1.raw.txt" | head -n 6
    grep -E "sm__inst_executed_pipe_xu.avg.pct" "$out/$1.raw.txt" | head -n 2
}

gpu_ab() {
    local name=$1 limit=$2
    shift 2
    stamp "$name"
    timeout "$limit" python3 scripts/triton_tile_ab.py --precompile 16 --reps 5 --json "$out/$name.json" "$@" \
        > "$out/$name.log" 2>&1
    echo "$name rc $?"; grep -E "^\| [a-z]" "$out/$name.log" | grep -v "^| variant" | cut -d'|' -f2-5,8-10
}

gpu_bench() {
    local tag=$1 limit=$2
    shift 2
    timeout "$limit" python3 scripts/bench.py --backends triton cudnn fa2 "$@" --out-dir "$out" --tag "$tag" \
        --precompile 12 > "$out/bench_$tag.log" 2>&1
    echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out/$tag.md"
}

gpu_bench_rows() {
    timeout "$1" python3 scripts/bench.py --backends hopper cudnn fa2 --headdims 64 128 256 --directions fwd bwd \
        --seqlens 512 2048 8192 16384 --out-dir "$out" --tag rows > "$out/bench_rows.log" 2>&1
    echo "bench rc $?"; grep -E "^\| (64|128|256) " "$out/rows.md"
}

gpu_sweep() {
    local hd=$1 seqlen=$2 stem=$3
    shift 3
    timeout 200 python3 -m fa3nn.backends.triton.tune --headdim "$hd" --seqlen "$seqlen" --kinds "$@" --tma auto \
        --causal "${CAUSAL:-both}" --workers 16 --json "$out/$stem.json" > "$out/$stem.log" 2>&1
    echo "$stem rc $?"
    grep -E "TFLOP" "$out/$stem.log" | sed 's/ tma=[a-z0-9]*//; s/ TFLOP\/s//; s/causal=/c/' | paste -sd' ' | fold -w 240
}

gpu_fp8_record() {
    local limit=$1
    shift
    timeout "$limit" python scripts/bench.py --backends hopper-fp8 hopper cudnn --directions fwd --iters 5 \
        --rotate 2 --out-dir "$out" --tag fp8record "$@" > "$out/bench.log" 2>&1
    echo "bench rc $?"; grep -E "^\| [0-9]+ " "$out"/*fp8record*.md | head -n 40
}

gpu_cudnn_fp8() {
    local limit=$1
    shift
    gpu_wheels "$out/wheels" "nvidia_cudnn_frontend-*.whl"
    timeout "$limit" python3 scripts/bench_cudnn_fp8.py --json "$out/cudnn_fp8.json" --cudnn-outputs e4m3 "$@" \
        > "$out/cudnn_fp8.log" 2>&1
    echo "cudnn rc $?"; sed -n '/^| hdim/,$p' "$out/cudnn_fp8.log" | cut -d'|' -f2-7
    rm -rf "$out/wheels"
}

gpu_table() {
    local name=$1 limit=$2 script=$3
    shift 3
    timeout "$limit" python3 "$script" --json "$out/$name.json" "$@" > "$out/$name.log" 2>&1
    echo "$name rc $?"; grep -E "^\|" "$out/$name.log"; tail -n 3 "$out/$name.log" | grep -v "^|"
}

gpu_all_tests() {
    timeout "$1" python -m pytest -m gpu -n "${TEST_WORKERS:-8}" -q -rfE -p no:cacheprovider tests/ \
        > "$out/tests_all.log" 2>&1
    echo "tests rc $?"; tail -n 1 "$out/tests_all.log"
    grep -E "^(FAILED|ERROR) " "$out/tests_all.log" | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' > "$out/failed.txt"
    if [ -s "$out/failed.txt" ]; then
        stamp "rerun $(wc -l < "$out/failed.txt") alone"
        # one test id per line; ids hold spaces (parametrized Window(left=-1, right=-1)), so NUL-separated
        head -n "${RERUN_MAX:-40}" "$out/failed.txt" | tr '\n' '\0' | timeout "$2" xargs -0 python -m pytest -q -rfE \
            -p no:cacheprovider > "$out/rerun.log" 2>&1
        echo "rerun rc $?"; grep -E "^(FAILED|ERROR) " "$out/rerun.log" | head -n 15; tail -n 1 "$out/rerun.log"
    fi
}

gpu_fp8_bench() {
    local name=$1 limit=$2
    shift 2
    timeout "$limit" python scripts/bench_hopper_fp8.py --json "$out/$name.json" "$@" > "$out/$name.log" 2>&1
    echo "$name rc $?"; sed -n '/^| hdim/,$p' "$out/$name.log"
}
