#!/bin/bash
# Exploration (issue 9): mhc_pre at few tokens, block reduction on (default) vs off, kernel times
# and per-kernel profile. Results in $OUT/sweep.tgz and $OUT/summary.txt.
R=$OUT/sweep; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt
SH=1x1x8x16384,1x1x4x4096,1x1x6x1024,1x1x4x65536,1x2x8x16384,1x4x8x16384,1x8x8x16384,1x16x8x16384,1x32x8x16384,1x4x4x4096,1x16x4x4096,1x32x4x4096,1x64x4x4096,1x128x4x4096,1x256x4x4096,1x512x4x4096,1x4096x4x4096
for v in auto off; do
  ADJOINT_TUNE_BLOCK_REDUCTION=$v timeout 100 python3 bench/mhc_pre_tokens_sweep.py --shapes $SH --runs 30 > $R/sweep_$v.txt 2>&1
  ADJOINT_TUNE_BLOCK_REDUCTION=$v timeout 40 python3 - > $R/prof_$v.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, "tests/gpu")
import mhc_kernel_profile as m
m.profile("mhc_pre", (1, 1, 8, 16384)); m.profile("mhc_pre", (1, 16, 8, 16384)); m.profile("mhc_pre", (1, 4096, 4, 4096))
PY
done
tar -czf $OUT/sweep.tgz -C $OUT sweep
{ cat $R/device.txt; for f in $R/*.txt; do echo "== $f"; cat $f; done; } > $OUT/summary.txt 2>&1
