#!/bin/bash
# gridbf GPU call 1: the scan by digits (ADJOINT_TUNE_BINNED_SCAN=1, new default) against the
# chained levels (0, main's kernels), and taps in the gather for 32/64 channels
# (ADJOINT_TUNE_BINNED_TAPS=256), bilinear zeros; per-kernel profiles; parity subset.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridbf PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
cat build/STAGED >> $OUT/device.txt
for cfg in "0 16" "1 16" "1 256"; do
  set -- $cfg
  ADJOINT_TUNE_BINNED_SCAN=$1 ADJOINT_TUNE_BINNED_TAPS=$2 timeout 32 python3 bench/bench_grid_sampler.py \
    --modes bilinear --shapes 0,1,2 --paddings zeros --dtypes f32,bf16 --runs 30 \
    --out $OUT/bench_scan$1_taps$2.json > $OUT/bench_scan$1_taps$2.txt 2>&1
  echo "bench scan$1 taps$2 rc=$?"
done
for cfg in "1 16" "1 256"; do
  set -- $cfg
  ADJOINT_TUNE_BINNED_SCAN=$1 ADJOINT_TUNE_BINNED_TAPS=$2 timeout 20 python3 tests/gpu/grid_sampler_kernel_profile.py \
    --modes bilinear --dtypes bf16,f32 --shapes 1,2 > $OUT/profile_scan$1_taps$2.txt 2>&1
  echo "profile scan$1 taps$2 rc=$?"
done
timeout 40 python3 -m pytest -q -x tests/gpu/test_grid_sampler.py -k "test_deterministic or 40 or 64" > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"; tail -1 $OUT/pytest.txt
for f in $OUT/bench_*.txt; do echo "== $f"; grep -E "bilinear zeros" $f | awk '{print $4, $5, $6, $7, $8, $9, $10}'; done
