#!/bin/bash
# Final verification of merged main on the GPU (one device call): gpu-check (gtest, pytest,
# sanitizers), racecheck of the rings of the block (x_mix's partials), per-kernel and program
# times of the mHC programs with the merged defaults, this session's knobs off against on
# (lane spans, rings of the block, tile rows). Run from the
# repository root with the build staged in .stage/build (scripts/gpu-check --stage build).
# Everything lands in $OUT/final8.tgz plus $OUT/summary.txt (the tool returns few files).
R=$OUT/final8; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED 2>/dev/null; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=${GPU_CHECK_SECONDS:-300} GPU_CHECK_PYTEST_WORKERS=8 timeout 330 scripts/gpu-check "$R/check" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
BWD4="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
BWD6="mhc_pre_backward dtype=bf16 batch=2 seq=2048 n=6 dim=1024"
for s in "$BWD4" "$BWD6"; do
  echo "##### racecheck: $s" >> $R/racecheck.txt
  ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 timeout 45 compute-sanitizer --tool racecheck --print-limit 20 python3 tests/gpu/mhc_launch_once.py "$s" >> $R/racecheck.txt 2>&1
  echo "rc=$?" >> $R/racecheck.txt
done
el "racecheck"
timeout 60 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward mhc_pre mhc_post_backward > $R/profile.txt 2>&1
el "profile"
timeout 75 python3 tests/gpu/mhc_backward_sweep.py --budget 70 --runs 20 default: before:ADJOINT_TUNE_LANE_SPANS=0,ADJOINT_TUNE_TILE_UNIFORM_RING=0,ADJOINT_TUNE_TILE_BLOCK_ROWS=0 > $R/sweep_backward.txt 2>&1
el "backward sweep"
timeout 40 python3 tests/gpu/mhc_backward_sweep.py --op mhc_pre --budget 36 --runs 20 default: before:ADJOINT_TUNE_LANE_SPANS=0 > $R/sweep_pre.txt 2>&1
el "pre sweep"
tar -czf $OUT/final8.tgz -C $OUT final8
{ cat $R/progress.txt; tail -40 $R/gpu-check.log; grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt; cat $R/profile.txt; tail -30 $R/sweep_backward.txt; tail -12 $R/sweep_pre.txt; } > $OUT/summary.txt 2>&1
