#!/bin/bash
# Final verification 2 (main with rows folded into block partials, after final A/B):
# gpu-check (gtest of the staged GPU binaries, pytest of tests/gpu, compute-sanitizer), then
# mhc_pre time + parity at the defaults over few-token, awkward-D and issue 9's shapes.
# Results in $OUT/final2.tgz and $OUT/summary.txt.
R=$OUT/final2; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=300 GPU_CHECK_PYTEST_WORKERS=8 timeout 330 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
SH=1x1x8x16384,1x16x8x16384,1x8x8x12000,1x40x8x2000,1x126x8x1000,1x181x8x4096,1x256x4x4096,1x1024x4x4096,3x77x6x2048,1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512
timeout 120 python3 tests/gpu/mhc_pre_forward_check.py --shapes $SH --json $R/check.json > $R/check.txt 2>&1
tar -czf $OUT/final2.tgz -C $OUT final2
{ cat $R/device.txt; tail -22 $R/gpu-check.log; cat $R/check.txt; } > $OUT/summary.txt 2>&1
