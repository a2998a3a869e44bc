#!/usr/bin/env bash
# Fortieth session: where the cluster backward's time goes (the cluster variant ran 0.49-0.58x bulk_dq, and its
# timing-only build without multicast, exchange and shared stages (FA3NN_CLUSTER_ABLATE=7) still 0.62-0.66x, H200
# s40c): per-SASS-line stall samples of bulk_dq and of the ablation build at MLA 2k non-causal. Carry build/libs.tar.xz
# with libfa3nn_hopper.so and ex7/libfa3nn_hopper.so.
python3 -c "import tarfile; tarfile.open('build/libs.tar.xz').extractall('build')"
source scripts/gpu_env.sh; gpu_setup /tmp/o
prof() {
  FA3NN_HOPPER_LIB=$2 timeout 200 ncu --clock-control none --section WarpStateStats --section SourceCounters \
    --section LaunchStats --import-source no -k "regex:flash_bwd_kernel" --launch-skip 1 --launch-count 1 -f \
    -o $out/$1 python3 scripts/hopper_profile_case.py --calls 2 --kernel bwd --headdim 192 --headdim-v 128 \
    --seqlen 2048 --bwd-variant $3 > $out/$1.log 2>&1
  echo "$1 rc $?"
  ncu -i $out/$1.ncu-rep --page source --csv --print-source sass > $out/$1.sass.csv 2>&1
  ncu -i $out/$1.ncu-rep --page details > $out/$1.txt 2>&1
  rm -f $out/$1.ncu-rep
  gzip -f $out/$1.sass.csv
}
prof bulk $PWD/build/libfa3nn_hopper.so bulk_dq
prof ex7 $PWD/build/ex7/libfa3nn_hopper.so cluster
ls -la $out
