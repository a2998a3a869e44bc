#!/usr/bin/env bash
# Is the SASS of every native Hopper kernel the same in two trees? For refactors that must not change a kernel.
#
#   bash scripts/sass_identical.sh main HEAD           # two git revisions of this repository
#   bash scripts/sass_identical.sh main .              # a revision against the working tree (uncommitted edits)
#   bash scripts/sass_identical.sh /path/a /path/b     # two checkouts (folders holding kernels/hopper/)
#
# Each side compiles every translation unit in its own fa3nn/backends/hopper_build.py UNITS with that file's
# NVCC_FLAGS (`nvcc -cubin -I kernels/hopper`), dumps it with cuobjdump -sass, drops the address column
# (`/*0a10*/`), folds white space (cuobjdump pads columns per file) and keeps everything else: the 128-bit
# encodings with their scheduling bits included, so "identical" means the same instructions with the same stall
# counts and barriers. Functions are compared one by one, by mangled name, so a unit whose kernels only moved in
# the file still counts as identical.
# Prints one line per unit (identical / DIFFERENT / only in one side) and exits 1 when any unit differs.
# Dumps are cached by a hash of the side's kernel sources + flags + nvcc version ($SASS_CACHE, default
# ~/.cache/fa3nn/sass), so comparing against main a second time only compiles the changed side.
# Needs nvcc; cuobjdump from $CUOBJDUMP, PATH, $CUDA_HOME/bin or Triton's bundled copy. No GPU.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 REV_OR_DIR_A REV_OR_DIR_B" >&2; exit 2; }
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
nvcc=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
[ -x "$nvcc" ] || { echo "nvcc not found: set NVCC=/path/to/nvcc or put it on PATH" >&2; exit 2; }
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || true)}
[ -n "$cuobjdump" ] || [ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump" ] \
    || cuobjdump=${CUDA_HOME:-/usr/local/cuda}/bin/cuobjdump
[ -n "$cuobjdump" ] || cuobjdump=$(python -c \
    "import triton,os;print(os.path.join(os.path.dirname(triton.__file__),'backends/nvidia/bin/cuobjdump'))" \
    2>/dev/null || true)
[ -x "$cuobjdump" ] || { echo "cuobjdump not found: set CUOBJDUMP=/path/to/cuobjdump" >&2; exit 2; }
# Drop the address column; fold white space, whose column widths cuobjdump sets per file (a cubin with other kernel
# names pads differently).
normalize='s#/\*[0-9a-f]{4,}\*/##; s/[[:space:]]+/ /g; s/^ //; s/ $//'
cache=${SASS_CACHE:-$HOME/.cache/fa3nn/sass}
jobs=${JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Materialize one side as a folder with kernels/hopper/ and fa3nn/backends/hopper_build.py.
materialize() {  # $1 rev or dir, $2 destination
    if [ -d "$1" ] && [ -d "$1/kernels/hopper" ]; then
        echo "$(cd "$1" && pwd)"
    else
        git -C "$repo" rev-parse --verify -q "$1^{commit}" >/dev/null \
            || { echo "$1 is neither a folder holding kernels/hopper/ nor a git revision of $repo" >&2; exit 2; }
        mkdir -p "$2"
        git -C "$repo" archive "$1" kernels/hopper fa3nn/backends/hopper_build.py | tar -x -C "$2"
        echo "$2"
    fi
}

# Print "UNITS" and "FLAGS" lines from the side's own hopper_build.py (stdlib-only module, loaded by path).
build_config() {
    python - "$1/fa3nn/backends/hopper_build.py" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hopper_build_side", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(" ".join(module.UNITS))
print(" ".join(module.NVCC_FLAGS))
EOF
}

# Compile + dump one side into the cache; print the cache folder (one <unit>.sass per unit).
dump_side() {  # $1 tree
    local tree=$1 units flags key out
    { read -r units; read -r flags; } < <(build_config "$tree")
    key=$( { for f in $(cd "$tree/kernels/hopper" && ls ./*.cu ./*.cuh | sort); do
                 echo "$f"; cat "$tree/kernels/hopper/$f"; done
             echo "$units"; echo "$flags"; echo "$normalize"; "$nvcc" --version; } | sha256sum | cut -c1-20)
    out=$cache/$key
    if [ ! -f "$out/.complete" ]; then
        mkdir -p "$out"
        # shellcheck disable=SC2086  # flags and units are word lists
        printf '%s\n' $units | xargs -P "$jobs" -I{} sh -c '
            unit=$1; tree=$2; out=$3; nvcc=$4; cuobjdump=$5; normalize=$6; shift 6
            cubin=$out/${unit%.cu}.cubin
            "$nvcc" "$@" -cubin -I "$tree/kernels/hopper" -o "$cubin" "$tree/kernels/hopper/$unit" \
                || { echo "nvcc failed on $tree/kernels/hopper/$unit" >&2; exit 255; }
            "$cuobjdump" -sass "$cubin" | sed -E "$normalize" > "$out/$unit.sass"
            rm -f "$cubin"' _ {} "$tree" "$out" "$nvcc" "$cuobjdump" "$normalize" $flags
        echo "$units" > "$out/.complete"
    fi
    echo "$out"
}

# Split a dump into one file per function (named by its mangled name), under $2.
split_functions() {
    mkdir -p "$2"
    awk -v dir="$2" '/Function : /{name=$3} name!=""{print > (dir "/" name)}' "$1"
}

side_a=$(materialize "$1" "$work/a")
side_b=$(materialize "$2" "$work/b")
echo "A = $1, B = $2 (nvcc: $("$nvcc" --version | tail -n 1))"
dumps_a=$(dump_side "$side_a")
dumps_b=$(dump_side "$side_b")
status=0
for unit in $(cat "$dumps_a/.complete" "$dumps_b/.complete" | tr ' ' '\n' | sort -u); do
    if [ ! -f "$dumps_a/$unit.sass" ] || [ ! -f "$dumps_b/$unit.sass" ]; then
        echo "$unit: only in $([ -f "$dumps_a/$unit.sass" ] && echo A || echo B)"; status=1; continue
    fi
    split_functions "$dumps_a/$unit.sass" "$work/fa/$unit"
    split_functions "$dumps_b/$unit.sass" "$work/fb/$unit"
    functions=$(find "$work/fa/$unit" -type f | wc -l)
    if diff -rq "$work/fa/$unit" "$work/fb/$unit" >/dev/null; then
        if [ "$functions" -eq 0 ]; then echo "$unit: identical (host code only, no kernels)"; continue; fi
        lines=$(cat "$work/fa/$unit"/* | grep -c ' ;' || true)
        echo "$unit: identical ($functions kernels, $lines instructions, sha256 $(cat "$work/fa/$unit"/* \
            | sha256sum | cut -c1-12))"
    else
        echo "$unit: DIFFERENT ($(diff -r "$work/fa/$unit" "$work/fb/$unit" | grep -c '^[<>]' || true) lines differ)"
        status=1
        diff -rq "$work/fa/$unit" "$work/fb/$unit" | sed -E 's#^Files .*/fa/[^/]+/(\S+) and .*#    differs: \1#; s#^Only in .*/f([ab])/[^/]+: #    only in \U\1: #' \
            | head -n 20 || true
    fi
done
exit $status
