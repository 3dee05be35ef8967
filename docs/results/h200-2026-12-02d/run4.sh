#!/bin/bash
# Fourth device call: per-kernel times (torch.profiler, plain launches) of mhc_pre and
# mhc_pre_backward at few tokens with the new defaults, and with both rules off
# (ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768) in the same call.
# One file, $OUT/profile4/profile.txt.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache
C=$OUT/profile4; mkdir -p $C
S=1x1x8x16384,1x4x8x16384,1x1x4x65536,1x8x4x4096,1x16x8x16384
{
  echo "### defaults"; timeout 100 python3 tests/gpu/mhc_kernel_profile.py mhc_pre mhc_pre_backward --shapes $S
  echo "### before: ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768"
  ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 ADJOINT_TUNE_REDUCING_MIN_GROUPS=32768 timeout 100 python3 tests/gpu/mhc_kernel_profile.py mhc_pre mhc_pre_backward --shapes $S
} > $C/profile.txt 2>&1
grep -c '==' $C/profile.txt
