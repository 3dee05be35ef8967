#!/bin/bash
# Final verification, call A (main with the few-token block splits): gpu-check (gtest of the
# staged GPU binaries incl. package_test, pytest of tests/gpu, compute-sanitizer memcheck +
# racecheck), then mhc_pre time + parity at ADJOINT_TUNE_BLOCK_FEW_TOKENS 0 vs the default over
# few-token, awkward-D and issue-9 shapes. Results in $OUT/finalA.tgz, $OUT/summary.txt.
R=$OUT/finalA; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=300 GPU_CHECK_PYTEST_WORKERS=8 timeout 330 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
SH=1x1x8x16384,1x1x4x4096,1x2x8x16384,1x16x8x16384,1x32x8x16384,1x8x8x12000,1x1x4x7168,1x126x8x1000,1x181x8x4096,1x64x4x4096,1x256x4x4096,1x700x4x2560,1x1024x4x4096,3x77x6x2048,1x4096x4x4096,2x2048x6x1024
for m in 0 7; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=$m timeout 110 python3 tests/gpu/mhc_pre_forward_check.py --shapes $SH --json $R/check_m$m.json > $R/check_m$m.txt 2>&1
done
tar -czf $OUT/finalA.tgz -C $OUT finalA
{ cat $R/device.txt; tail -30 $R/gpu-check.log; paste <(cut -c1-44 $R/check_m0.txt) <(cut -c30-200 $R/check_m7.txt); } > $OUT/summary.txt 2>&1
