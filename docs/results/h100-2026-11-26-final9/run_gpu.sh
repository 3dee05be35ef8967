#!/bin/bash
# Final verification of merged main on the GPU (one device call): gpu-check (gtest, pytest,
# sanitizers), racecheck of the n6 x_mix launch (long tiles, block ring), per-kernel times of the
# mHC programs, this session's knobs off against on at the bench shapes, and the row-stage unroll
# rule (ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS) at the small shapes it changes: cold prepare on this
# host and kernel time, rule on against off. Run from the repository root with the build staged in
# .stage/build (scripts/gpu-check --stage build). Everything lands in $OUT/final9.tgz plus
# $OUT/summary.txt (the tool returns few files).
R=$OUT/final9; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED 2>/dev/null; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=${GPU_CHECK_SECONDS:-300} GPU_CHECK_PYTEST_WORKERS=8 timeout 320 scripts/gpu-check "$R/check" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
BWD6="mhc_pre_backward dtype=bf16 batch=2 seq=2048 n=6 dim=1024"
echo "##### racecheck: $BWD6" >> $R/racecheck.txt
ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 timeout 50 compute-sanitizer --tool racecheck --print-limit 20 python3 tests/gpu/mhc_launch_once.py "$BWD6" >> $R/racecheck.txt 2>&1
echo "rc=$?" >> $R/racecheck.txt
el "racecheck"
timeout 80 python3 tests/gpu/mhc_backward_sweep.py --budget 75 --runs 20 --shapes 1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512 default: ${KNOBS_OFF:-before:ADJOINT_TUNE_TILE_ACCUMULATORS=64} > $R/sweep_backward.txt 2>&1
el "backward sweep"
SMALL=("mhc_pre batch=1 seq=3 n=4 dim=32 dtype=bf16" "mhc_pre batch=2 seq=3 n=4 dim=12 dtype=bf16"
  "mhc_pre_backward batch=2 seq=3 n=4 dim=12 dtype=bf16" "mhc_pre batch=1 seq=5 n=6 dim=7 dtype=f32"
  "mhc_pre_backward batch=1 seq=5 n=6 dim=7 dtype=f16 with_grad_x_post=true"
  "mhc_pre_backward batch=1 seq=64 n=4 dim=128 dtype=bf16" "mhc_sinkhorn batch=4 seq=64 n=8 dtype=f32"
  "mhc_sinkhorn batch=1 seq=5 n=6 t_max=1 eps=0.01")
for setting in rule:1024 unrolled:0; do
  name=${setting%%:*}
  ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS=${setting#*:} ADJOINT_CACHE_DIR=$(mktemp -d) CUDA_CACHE_PATH=$(mktemp -d) \
    timeout 60 python3 bench/unroll_ab.py "${SMALL[@]}" > $R/rowstage_$name.json 2> $R/rowstage_$name.err
  echo "rc=$?" >> $R/rowstage_$name.err
done
el "row stage A/B"
tar -czf $OUT/final9.tgz -C $OUT final9
{ cat $R/progress.txt; tail -40 $R/gpu-check.log; grep -E "rc=|ERROR SUMMARY|RACECHECK SUMMARY" $R/racecheck.txt; tail -40 $R/sweep_backward.txt; for f in $R/rowstage_*.json; do echo "== $f"; cat $f; done; tail -3 $R/rowstage_*.err; } > $OUT/summary.txt 2>&1
