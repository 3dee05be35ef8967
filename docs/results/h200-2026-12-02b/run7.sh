#!/bin/bash
# Seventh device call: gpu-check's gtest and pytest steps on the staged build of d4eedb0 (the taps that stay records count)
# (allow_atomics takes the binned gather where it is the faster; the drop-in passes
# allow_atomics). Results in $OUT/check7.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
C=$OUT/check7; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=150 GPU_CHECK_PYTEST_WORKERS=12 timeout 160 scripts/gpu-check "$C" gtest,pytest > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
tail -16 $C/gpu-check.out
