# sourced on the device: profile NAME LIB VARIANT
python3 -c "import tarfile; tarfile.open('build/libs.tar.xz').extractall('build')"
source scripts/gpu_env.sh; gpu_setup /tmp/o
prof() {
  FA3NN_HOPPER_LIB=$2 timeout 150 ncu --clock-control none --section LaunchStats --section Occupancy --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis -k "regex:flash_bwd_kernel" --launch-skip 1 --launch-count 1 -f -o $out/$1 python3 scripts/hopper_profile_case.py --calls 2 --kernel bwd --headdim 192 --headdim-v 128 --seqlen 2048 --bwd-variant $3 > $out/$1.log 2>&1
  echo "$1 rc $?"
  ncu -i $out/$1.ncu-rep --page details > $out/$1.txt 2>&1; rm -f $out/$1.ncu-rep
  grep -E "^ +(Duration|Cluster Size|Max Active Clusters|Max Cluster Size|Achieved Occupancy|Waves Per SM|SM Busy|Issue Slots Busy|L2 Cache Throughput|Memory Throughput|Compute \(SM\) Throughput|No Eligible|Warp Cycles Per Issued|Grid Size|Theoretical Occupancy|Stall)" $out/$1.txt | head -24
}
prof bulk $PWD/build/libfa3nn_hopper.so bulk_dq
prof ex7 $PWD/build/ex7/libfa3nn_hopper.so cluster
prof cluster $PWD/build/libfa3nn_hopper.so cluster
