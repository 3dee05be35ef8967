#!/bin/bash
# Call 12 (issue 9, for the next planner): per-kernel times of mhc_pre_backward at few-token
# and short-D shapes (does the backward starve as the forward did?). $OUT/bwd.tgz, summary.txt.
R=$OUT/bwd; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt; cat .stage/build/STAGED >> $R/device.txt
timeout 150 python3 - > $R/profile.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, "tests/gpu")
import mhc_kernel_profile as m
for s in [(1, 16, 8, 16384), (1, 40, 8, 2000), (1, 126, 8, 1000), (1, 256, 4, 4096), (3, 77, 6, 2048), (1, 1024, 4, 4096)]:
    m.profile("mhc_pre_backward", s)
PY
tar -czf $OUT/bwd.tgz -C $OUT bwd
{ cat $R/device.txt; grep -v Warn $R/profile.txt; } > $OUT/summary.txt 2>&1
