#!/bin/bash
# Fifth device call: where between 8 and 48 tokens the streamed split beats the block reduction
# (mhc_pre's h_mix), by weight size. Per-kernel sums (torch.profiler) and forward times, the block
# schedule at every count (ADJOINT_TUNE_BLOCK_MIN_TOKENS=1) against the streamed split with no
# bytes bound (MIN_TOKENS=64, ADJOINT_TUNE_BLOCK_STREAMED_MB=1048576), in one call. $OUT/tokens5.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache
C=$OUT/tokens5; mkdir -p $C
S=1x8x4x4096,1x16x4x4096,1x24x4x4096,1x31x4x4096,1x48x4x4096,1x8x6x2048,1x16x6x2048,1x24x6x2048,1x31x6x2048,1x48x6x2048,1x8x8x1024,1x16x8x1024,1x31x8x1024,1x2x8x16384,1x2x4x65536,1x4x4x16384,1x16x4x16384,2x12x4x2560,1x8x8x4096,1x16x8x4096
{
  echo "### block (MIN_TOKENS=1)"; ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 timeout 120 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes $S
  echo "### streamed (MIN_TOKENS=64 STREAMED_MB=1048576)"; ADJOINT_TUNE_BLOCK_MIN_TOKENS=64 ADJOINT_TUNE_BLOCK_STREAMED_MB=1048576 timeout 120 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes $S
} > $C/profile.txt 2>&1
{
  echo "### block"; ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 timeout 80 python3 tests/gpu/mhc_pre_forward_check.py --shapes $S
  echo "### streamed"; ADJOINT_TUNE_BLOCK_MIN_TOKENS=64 ADJOINT_TUNE_BLOCK_STREAMED_MB=1048576 timeout 80 python3 tests/gpu/mhc_pre_forward_check.py --shapes $S
} > $C/forward.txt 2>&1
grep -c '==' $C/profile.txt; grep -c 'bitwise True' $C/forward.txt
