#!/bin/bash
# gridcopy GPU call 1 (commit 5453125): transposed store off (0) vs on (1), same machine, same call.
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridcopy PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/device.txt
for knob in 0 1; do
  ADJOINT_TUNE_TRANSPOSED_STORE=$knob timeout 40 python3 bench/bench_grid_sampler.py --modes bilinear,bicubic --shapes 0,1 \
    --paddings zeros --dtypes f32,bf16 --runs 50 --out $OUT/bench_ts$knob.json > $OUT/bench_ts$knob.txt 2>&1
  echo "bench ts$knob rc=$?"
done
for knob in 0 1; do
  ADJOINT_TUNE_TRANSPOSED_STORE=$knob timeout 15 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bilinear \
    --dtypes f32,bf16 --shapes 0,1 > $OUT/profile_ts$knob.txt 2>&1
  echo "profile ts$knob rc=$?"
done
timeout 30 python3 -m pytest -q -x tests/gpu/test_grid_sampler.py -k "test_deterministic or (test_parity and 36)" \
  > $OUT/pytest.txt 2>&1
echo "pytest rc=$?"
