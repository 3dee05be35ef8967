#!/bin/bash
# Call 2 (hmix): base and new of x_mix's partials (ADJOINT_TUNE_TILE_UNIFORM_RING) and h_mix's
# partials (ADJOINT_TUNE_BLOCK_OUTPUT_POINTS), program + per-kernel times, digests, ncu, pytest.
cd "$(dirname "$0")"
export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
T0=$(date +%s)
{ nvidia-smi -L; git log -1 --format=%h 2>/dev/null; cat build/STAGED 2>/dev/null; } > $OUT/device.txt
timeout 72 python3 tests/gpu/mhc_backward_sweep.py --budget 68 --runs 20 base:ADJOINT_TUNE_TILE_UNIFORM_RING=0 new: new_mb4:ADJOINT_TUNE_TILE_MIN_BLOCKS=4 base_mb4:ADJOINT_TUNE_TILE_UNIFORM_RING=0,ADJOINT_TUNE_TILE_MIN_BLOCKS=4 new16_mb4:ADJOINT_TUNE_TILE_PREFETCH=16,ADJOINT_TUNE_TILE_MIN_BLOCKS=4 > $OUT/sweep-backward.txt 2>&1
echo "after backward sweep $(( $(date +%s) - T0 )) s" >> $OUT/device.txt
timeout 45 python3 tests/gpu/mhc_backward_sweep.py --op mhc_pre --budget 42 --runs 20 mk8: mk12:ADJOINT_TUNE_BLOCK_OUTPUT_POINTS=12 mk24:ADJOINT_TUNE_BLOCK_OUTPUT_POINTS=24 > $OUT/sweep-pre.txt 2>&1
echo "after pre sweep $(( $(date +%s) - T0 )) s" >> $OUT/device.txt
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats"
BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
PRE="mhc_pre dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
{
  for v in 0 1; do echo "##### x_mix partials, ADJOINT_TUNE_TILE_UNIFORM_RING=$v"; ADJOINT_TUNE_TILE_UNIFORM_RING=$v timeout 18 ncu --kernel-name regex:'x_mix_x_mix_partials' --launch-count 1 $SECS python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF==" ; done
  echo "##### h_mix partials, ADJOINT_TUNE_BLOCK_OUTPUT_POINTS=12"; ADJOINT_TUNE_BLOCK_OUTPUT_POINTS=12 timeout 18 ncu --kernel-name regex:'h_mix_partials' --launch-count 1 $SECS python3 tests/gpu/mhc_launch_once.py "$PRE" 2>&1 | grep -v "^==PROF=="
} > $OUT/ncu.txt 2>&1
echo "after ncu $(( $(date +%s) - T0 )) s" >> $OUT/device.txt
LEFT=$(( 192 - ($(date +%s) - T0) ))
if [ $LEFT -gt 15 ]; then timeout $LEFT python3 -m pytest -q -x tests/gpu/test_mhc.py > $OUT/pytest-mhc.txt 2>&1; echo "pytest rc=$?" >> $OUT/pytest-mhc.txt; else echo "pytest: no time left ($LEFT s)" > $OUT/pytest-mhc.txt; fi
echo "end $(( $(date +%s) - T0 )) s" >> $OUT/device.txt
