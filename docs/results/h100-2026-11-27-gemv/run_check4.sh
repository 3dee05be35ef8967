#!/bin/bash
# Call 4 (issue 9): ADJOINT_TUNE_BLOCK_FEW_TOKENS 7 (default) vs 15 (bit 8: the wide G's
# partials in chunks of 64) vs 0, mhc_pre time + parity at one-tile shapes with 16 MB or more of
# phi. Results in $OUT/check4.tgz and $OUT/summary.txt.
R=$OUT/check4; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt; cat .stage/build/STAGED >> $R/device.txt
SH=1x1x8x16384,1x2x8x16384,1x16x8x16384,1x32x8x16384,1x1x8x8192,1x4x6x16384,1x1x4x65536,1x8x8x12000
for m in 7 15 0; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=$m timeout 100 python3 tests/gpu/mhc_pre_forward_check.py --shapes $SH --json $R/check_m$m.json > $R/check_m$m.txt 2>&1
done
tar -czf $OUT/check4.tgz -C $OUT check4
{ cat $R/device.txt; paste <(cut -c1-60 $R/check_m7.txt) <(cut -c30-44 $R/check_m15.txt) <(cut -c30-44 $R/check_m0.txt); grep -h worst $R/check_m15.txt | cut -c60-; } > $OUT/summary.txt 2>&1
