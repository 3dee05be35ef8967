#!/bin/bash
# Final verification, call 1 (main 06a3c4e: the wider tap bound, progressive sums, the merged
# dxspan branch): gpu-check (gtest of the staged GPU binaries incl. package_test, pytest of
# tests/gpu, compute-sanitizer memcheck + racecheck). Results in $OUT/check.tgz, $OUT/summary.txt.
R=$OUT/check; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=300 GPU_CHECK_PYTEST_WORKERS=8 timeout 330 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
tar -czf $OUT/check.tgz -C $OUT check
{ cat $R/device.txt; tail -40 $R/gpu-check.log; } > $OUT/summary.txt 2>&1
