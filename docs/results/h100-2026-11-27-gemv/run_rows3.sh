#!/bin/bash
# Call 9 (issue 9): ADJOINT_TUNE_BLOCK_SPLIT_ROWS 0 vs 1 with the fold tail bounded while G doubles (rows fold into
# the partials: contiguous ranges of one row), mhc_pre time + parity, few-token, awkward-D and
# issue 9's shapes. Results in $OUT/rows3.tgz and $OUT/summary.txt.
R=$OUT/rows3; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt; cat .stage/build/STAGED >> $R/device.txt
SH=1x40x8x2000,1x8x8x12000,2x50x6x1500,1x126x8x1000,1x100x8x1000,3x77x6x2048,4x64x4x1024,1x300x4x768,1x16x6x3000,2x200x4x1536,1x256x4x4096,1x4096x4x4096
for v in 0 1 0 1; do
  ADJOINT_TUNE_BLOCK_SPLIT_ROWS=$v timeout 120 python3 tests/gpu/mhc_pre_forward_check.py --shapes $SH > $R/check_r$v.txt.$$ 2>&1; cat $R/check_r$v.txt.$$ >> $R/check_r$v.txt; rm $R/check_r$v.txt.$$
done
tar -czf $OUT/rows3.tgz -C $OUT rows3
{ cat $R/device.txt; grep -h 'mhc_pre' $R/check_r0.txt | cut -c1-44 > /tmp/a; grep -h mhc_pre $R/check_r1.txt | cut -c30-200 > /tmp/b; paste /tmp/a /tmp/b; } > $OUT/summary.txt 2>&1
