#!/bin/bash
# Third device call: scripts/gpu-check with every step (gtest, pytest, bench, sanitize) on the
# staged build of the commit that makes the two rules defaults (streamed weights at few tokens,
# 2^17 threads for long serial reductions). Results in $OUT/check3.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
C=$OUT/check3; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $C/staged.txt
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=560 GPU_CHECK_PYTEST_WORKERS=12 timeout 585 scripts/gpu-check "$C" > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
tail -40 $C/gpu-check.out
