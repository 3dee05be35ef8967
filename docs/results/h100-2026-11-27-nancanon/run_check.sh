#!/bin/bash
# Call 1 (bfloat16's NaN made 0x7fff, the hardware rounding without its NaN select):
# the exhaustive rounding check of all 2^32 floats (default and integer forms, built here with
# nvcc), then gpu-check (gtest of the staged GPU binaries, pytest of tests/gpu with its parity
# and determinism checks, compute-sanitizer). Results in $OUT/check.tgz and $OUT/summary.txt.
R=$OUT/check; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
for form in default cvt0; do timeout 60 .stage/bf16check/$form > $R/bf16_$form.txt 2>&1; echo "rc=$?" >> $R/bf16_$form.txt; done
GPU_CHECK_SECONDS=420 GPU_CHECK_PYTEST_WORKERS=8 timeout 450 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
tar -czf $OUT/check.tgz -C $OUT check
{ cat $R/device.txt $R/bf16_*.txt; tail -22 $R/gpu-check.log; } > $OUT/summary.txt 2>&1
