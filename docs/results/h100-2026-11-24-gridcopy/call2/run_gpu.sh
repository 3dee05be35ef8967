#!/bin/bash
# gridcopy GPU call 2: main's kernels (ts0 lw32) vs transposed store (ts1) at lane widths 32/16/8.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridcopy PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/device.txt
for cfg in "0 32 40" "1 32 20" "1 16 20" "1 8 20"; do
  set -- $cfg
  ADJOINT_TUNE_TRANSPOSED_STORE=$1 ADJOINT_TUNE_GATHERED_LANE_WIDTH=$2 timeout $3 python3 bench/bench_grid_sampler.py \
    --modes bilinear,bicubic --shapes 0,1 --paddings zeros --dtypes f32,bf16 --runs 30 \
    --out $OUT/bench_ts$1_lw$2.json > $OUT/bench_ts$1_lw$2.txt 2>&1
  echo "bench ts$1 lw$2 rc=$?"
done
ADJOINT_TUNE_GATHERED_LANE_WIDTH=8 timeout 18 python3 -m pytest -q -x tests/gpu/test_grid_sampler.py -k "64" > $OUT/pytest_lw8_wide.txt 2>&1
echo "pytest lw8 wide rc=$?"; tail -1 $OUT/pytest_lw8_wide.txt
timeout 25 python3 -m pytest -q -x tests/gpu/test_grid_sampler.py -k "test_deterministic or (test_parity and 36) or (test_parity and 64)" > $OUT/pytest_default.txt 2>&1
echo "pytest default rc=$?"; tail -1 $OUT/pytest_default.txt
ADJOINT_TUNE_GATHERED_LANE_WIDTH=8 timeout 12 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bilinear \
    --dtypes f32,bf16 --shapes 1 > $OUT/profile_ts1_lw8.txt 2>&1
echo "profile rc=$?"
for f in $OUT/bench_ts*.txt; do echo "== $f"; grep -E "zeros (8x64|4x32)" $f | awk '{print $2, $4, $5, $6, $7, $8, $9}'; done
