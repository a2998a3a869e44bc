#!/usr/bin/env bash
# s50d: s51a cut to the last ~250 s of the fiftieth session's device time: the backward's GPU tests, then the
# schedule grid's first rows (written row by row, so a cut run keeps them). Library build/s50o/.
set -u
source "$(dirname "$0")/../gpu_env.sh"
gpu_setup /tmp/fa3nn-s50d s50o.tar.xz
export FA3NN_HOPPER_LIB=$PWD/build/s50o/libfa3nn_hopper.so
stamp start
cat "$out/gpu_state.txt"
gpu_pytest tests_bwd.log 60 tests/test_hopper_bwd.py
gpu_log_summary "$out/tests_bwd.log"
stamp "bwd tests"
timeout 60 python3 scripts/bwd_schedule_grid.py --rounds 2 --json "$out/schedule_grid.json" > "$out/schedule_grid.log" 2>&1
echo "grid rc $?"; grep -E "^\|" "$out/schedule_grid.log"
python3 -c "
import json; rows = json.load(open('$out/schedule_grid.json'))
for r in rows:
    t = r['tflops']; print(r['batch'], r['seqlen'], r['nheads'], r['nheads_kv'], r['headdim'], 'auto %.0f' % t['auto'], ' '.join('%s %.2f' % (m, x / t['auto']) for m, x in t.items() if m != 'auto'))
" 2>&1 | tail -n 12
stamp grid
