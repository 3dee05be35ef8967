#!/bin/bash
# Sixth device call: scripts/gpu-check with every step on the staged build of 9b659ff (the
# few-token bounds of tokens5), then per-kernel sums of mhc_pre / mhc_pre_backward at few tokens,
# the defaults against both rules off, in one file. Results in $OUT/check6.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache
C=$OUT/check6; mkdir -p $C
{ cat .stage/build/STAGED; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $C/staged.txt
GPU_CHECK_SECONDS=500 GPU_CHECK_PYTEST_WORKERS=12 timeout 520 scripts/gpu-check "$C" > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
S=1x1x8x16384,1x2x8x16384,1x8x6x2048,1x8x8x1024,1x24x4x4096,2x12x4x2560,1x3x6x2048,1x6x8x4096
{
  echo "### defaults"; timeout 30 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes $S
  echo "### before: ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768"
  ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768 timeout 30 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes $S
} >> $C/gpu-check.out 2>&1
tail -12 $C/summary.txt
