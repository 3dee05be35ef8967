#!/bin/bash
# Second device call: A/B of the two new knobs on the working tree (uncommitted then):
# ADJOINT_TUNE_BLOCK_MIN_TOKENS (1 = the block reduction at every token count, before; 8, the
# new default; 32) on mhc_pre's forward time at few tokens, and ADJOINT_TUNE_REDUCING_MIN_GROUPS
# (0 = 2^15 groups, before; 2^16; 2^17) on mhc_pre_backward's kernels. Results in $OUT/ab2.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache
C=$OUT/ab2; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt
S=1x1x8x16384,1x2x8x16384,1x4x8x16384,1x8x8x16384,1x16x8x16384,1x1x4x4096,1x4x4x4096,1x8x4x4096,1x1x4x65536,1x3x6x2048,1x8x6x2048,1x16x6x2048,2x2x4x2560,1x1x6x1024,1x4096x4x4096
for t in 1 8 32; do
  ADJOINT_TUNE_BLOCK_MIN_TOKENS=$t timeout 100 python3 tests/gpu/mhc_pre_forward_check.py --shapes $S --json $C/forward_mt$t.json > $C/forward_mt$t.txt 2>&1
done
B=1x1x8x16384,1x4x8x16384,1x16x8x16384,1x1x4x65536,1x2x6x4096
for g in 0 65536 131072; do
  ADJOINT_TUNE_REDUCING_MIN_GROUPS=$g timeout 80 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward --shapes $B > $C/backward_g$g.txt 2>&1
done
ADJOINT_TUNE_BLOCK_MIN_TOKENS=1 timeout 60 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes 1x1x8x16384,1x4x8x16384,1x1x4x65536 > $C/forward_profile_mt1.txt 2>&1
timeout 60 python3 tests/gpu/mhc_kernel_profile.py mhc_pre --shapes 1x1x8x16384,1x4x8x16384,1x1x4x65536 > $C/forward_profile_mt8.txt 2>&1
timeout 120 python3 -m pytest -q -x tests/gpu/test_mhc.py tests/gpu/test_mhc_autograd.py > $C/pytest_mhc.txt 2>&1
ADJOINT_TUNE_REDUCING_MIN_GROUPS=131072 timeout 120 python3 -m pytest -q -x tests/gpu/test_mhc.py > $C/pytest_mhc_g131072.txt 2>&1
cd $C && tail -n 3 *.txt
