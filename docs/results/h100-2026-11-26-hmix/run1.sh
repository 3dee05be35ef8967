#!/bin/bash
# Call 1 (hmix): ncu of h_mix partials and x_mix partials (base = ADJOINT_TUNE_TILE_UNIFORM_RING=0, new), timings.
# (Its ncu of the base caught h_mix twice and x_mix not at all: --launch-count 2 over three launches
# of mhc_pre; and its sweep's output did not come back: more than 8 files under $OUT.)
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi -L > $OUT/device.txt
PRE="mhc_pre dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats --section SourceCounters"
( ADJOINT_TUNE_TILE_UNIFORM_RING=0 python3 tests/gpu/mhc_launch_once.py "$PRE" "$BWD"; python3 tests/gpu/mhc_launch_once.py "$BWD" ) > $OUT/warm.txt 2>&1
ADJOINT_TUNE_TILE_UNIFORM_RING=0 timeout 60 ncu --kernel-name regex:'h_mix_partials|x_mix_x_mix_partials' --launch-count 2 $SECS -o $OUT/prof-base python3 tests/gpu/mhc_launch_once.py "$PRE" "$BWD" > $OUT/ncu-run-base.txt 2>&1
timeout 40 ncu --kernel-name regex:'x_mix_x_mix_partials' --launch-count 1 $SECS -o $OUT/prof-new python3 tests/gpu/mhc_launch_once.py "$BWD" > $OUT/ncu-run-new.txt 2>&1
for r in base new; do
  ncu -i $OUT/prof-$r.ncu-rep --print-details all > $OUT/ncu-$r-details.txt 2>&1
  ncu -i $OUT/prof-$r.ncu-rep --page raw --csv > $OUT/ncu-$r-raw.csv 2>&1
  ncu -i $OUT/prof-$r.ncu-rep --page source --csv --print-source sass > $OUT/ncu-$r-sass.csv 2>&1
done
rm -f $OUT/*.ncu-rep
timeout 70 python3 tests/gpu/mhc_backward_sweep.py --budget 60 base:ADJOINT_TUNE_TILE_UNIFORM_RING=0 new: new16:ADJOINT_TUNE_TILE_PREFETCH=16 new_mb4:ADJOINT_TUNE_TILE_MIN_BLOCKS=4 > $OUT/sweep1.txt 2>&1
echo done
