#!/bin/bash
# Exploration 2 (issue 9): ADJOINT_TUNE_BLOCK_FEW_TOKENS masks on mhc_pre over token counts,
# G forced at B*S = 1, per-kernel profiles. Results in $OUT/sweep2.tgz and $OUT/summary.txt.
R=$OUT/sweep2; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt
SH=1x1x8x16384,1x1x4x4096,1x1x6x1024,1x1x4x16384,1x2x8x16384,1x16x8x16384,1x32x8x16384,1x181x8x4096,1x64x4x4096,1x256x4x4096,1x512x4x4096,1x1024x4x4096,2x300x6x1024,1x4096x4x4096
for m in 0 1 3 7; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=$m timeout 100 python3 bench/mhc_pre_tokens_sweep.py --shapes $SH --runs 30 > $R/sweep_m$m.txt 2>&1
done
for g in 1024 2048; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=7 ADJOINT_TUNE_REDUCTION_SPLIT=$g timeout 40 python3 bench/mhc_pre_tokens_sweep.py --shapes 1x1x8x16384,1x1x4x16384,1x2x8x16384 --runs 30 > $R/sweep_m7_g$g.txt 2>&1
done
for m in 0 7; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=$m timeout 40 python3 - > $R/prof_m$m.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, "tests/gpu")
import mhc_kernel_profile as m
for s in [(1, 1, 8, 16384), (1, 16, 8, 16384), (1, 256, 4, 4096), (1, 1024, 4, 4096)]: m.profile("mhc_pre", s)
PY
done
tar -czf $OUT/sweep2.tgz -C $OUT sweep2
{ cat $R/device.txt; for f in $R/*.txt; do echo "== $f"; cat $f | grep -v Warn; done; } > $OUT/summary.txt 2>&1
