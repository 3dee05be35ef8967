#!/bin/bash
# First device call of the session of 2026-12-02 17:29: where mHC's few-token programs and
# grid_sampler's 3-channel and 3-d nearest programs spend their time on the H200 (per-kernel
# means under torch.profiler, plain launches), and the existing knobs that change the one-token
# h_mix schedule (block reduction off, a forced split). Results in $OUT/explore1.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache
C=$OUT/explore1; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $C/device.txt
S=1x1x8x16384,1x1x4x4096,1x4x8x16384,1x1x4x65536,1x16x6x2048
P="python3 tests/gpu/mhc_kernel_profile.py mhc_pre mhc_pre_backward --shapes $S"
F="python3 tests/gpu/mhc_pre_forward_check.py --shapes $S"
{
  echo "### default"; timeout 100 $P
  echo "### ADJOINT_TUNE_BLOCK_REDUCTION=off"; ADJOINT_TUNE_BLOCK_REDUCTION=off timeout 100 $P
  echo "### BLOCK_REDUCTION=off REDUCTION_SPLIT=4096"; ADJOINT_TUNE_BLOCK_REDUCTION=off ADJOINT_TUNE_REDUCTION_SPLIT=4096 timeout 100 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes $S
} > $C/profile_mhc.txt 2>&1
{
  echo "### default"; timeout 60 $F
  echo "### off"; ADJOINT_TUNE_BLOCK_REDUCTION=off timeout 60 $F
  echo "### off split 4096"; ADJOINT_TUNE_BLOCK_REDUCTION=off ADJOINT_TUNE_REDUCTION_SPLIT=4096 timeout 60 $F
} > $C/forward_times.txt 2>&1
timeout 120 python3 tests/gpu/grid_sampler_kernel_profile.py --modes nearest,bilinear,bicubic --dtypes f32 --shapes 2 --paddings zeros,reflection --three-d > $C/profile_grid.txt 2>&1
tail -5 $C/*.txt
