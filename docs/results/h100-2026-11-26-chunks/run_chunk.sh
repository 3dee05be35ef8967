#!/bin/bash
# Derived walk chunks A/B: ADJOINT_TUNE_BINNED_GATHER_CHUNK=64 (before) vs default (-1), then parity.
cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
SHAPES=4x1x1x1:22x7,2x2x3x7:100x15,2x3x4x6:19x181,1x8x9x5:120x96,2x16x12x10:96x128,1x2x3x4:297x261,2x32x8x8:256x256,8x64x128x128:128x128,32x3x224x224:224x224
for chunk in 64 -1; do
  ADJOINT_TUNE_BINNED_GATHER_CHUNK=$chunk ADJOINT_CACHE_DIR=/tmp/cache timeout 150 python3 bench/bench_grid_sampler.py \
    --shape-list $SHAPES --modes bilinear,nearest,bicubic --paddings zeros --dtypes f32,bf16 --runs 30 --warmup 3 \
    --out $OUT/chunk$chunk.json > $OUT/chunk$chunk.txt 2>&1
  echo "chunk $chunk rc=$?" >> $OUT/chunk$chunk.txt
done
ADJOINT_CACHE_DIR=/tmp/cache timeout 60 python3 tests/gpu/grid_sampler_kernel_profile.py --shape-list 4x1x1x1:22x7,2x3x4x6:19x181 --modes bilinear,nearest --dtypes f32 > $OUT/profile_chunks.txt 2>&1
ADJOINT_CACHE_DIR=/tmp/cachep timeout 150 python3 -m pytest -q -x $(python3 -c 'import xdist' 2>/dev/null && printf -- '-n 8') tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $OUT/pytest_grid.txt 2>&1
echo "pytest rc=$?" >> $OUT/pytest_grid.txt
