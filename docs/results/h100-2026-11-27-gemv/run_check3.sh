#!/bin/bash
# Call 3 (issue 9): the committed few-token rule (ADJOINT_TUNE_BLOCK_FEW_TOKENS default 7) vs 0,
# mhc_pre time + parity against test_mhc's f64 forward, few-token shapes, unseen shapes and
# issue 9's five; pytest of the forward through autograd (test_mhc_autograd) and the dynamic mHC cases. Results in $OUT/check3.tgz, summary.txt.
R=$OUT/check3; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
nvidia-smi -L > $R/device.txt; cat .stage/build/STAGED >> $R/device.txt
SH=1x1x8x16384,1x1x4x4096,1x1x6x1024,1x1x4x16384,1x2x8x16384,1x16x8x16384,1x32x8x16384,1x181x8x4096,1x126x8x1000,1x64x4x4096,1x256x4x4096,1x512x4x4096,1x700x4x2560,1x1024x4x4096,2x300x6x1024,3x77x6x2048,1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512
for m in 0 7; do
  ADJOINT_TUNE_BLOCK_FEW_TOKENS=$m timeout 150 python3 tests/gpu/mhc_pre_forward_check.py --shapes $SH --json $R/check_m$m.json > $R/check_m$m.txt 2>&1
done
timeout 120 python3 -m pytest tests/gpu/test_mhc_autograd.py tests/gpu/test_dynamic_shapes.py -q -n 8 -k mhc > $R/pytest.txt 2>&1; echo "rc=$?" >> $R/pytest.txt
tar -czf $OUT/check3.tgz -C $OUT check3
{ cat $R/device.txt; paste <(cut -c1-60 $R/check_m0.txt) <(cut -c9-120 $R/check_m7.txt); tail -3 $R/pytest.txt; } > $OUT/summary.txt 2>&1
