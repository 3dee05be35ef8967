#!/bin/bash
# First device call of the session of 2026-12-02 12:27: scripts/gpu-check with every step (gtest,
# pytest, bench, sanitize) on the staged build of 1329b61 (mHC empty batches; the review mends
# of 251045f, not GPU-checked before). Results in $OUT/check1.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
C=$OUT/check1; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $C/device.txt
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=560 GPU_CHECK_PYTEST_WORKERS=12 timeout 580 scripts/gpu-check "$C" > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
tail -40 $C/gpu-check.out
