#!/bin/bash
cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 ADJOINT_CACHE_DIR=/tmp/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
for lanes in 32 16 8; do
  ADJOINT_TUNE_GATHERED_LANES=$lanes timeout 60 python3 bench/bench_grid_sampler_3d.py --runs 50 --out $OUT/g3_lanes$lanes.json > $OUT/g3_lanes$lanes.txt 2>&1
  ADJOINT_TUNE_GATHERED_LANES=$lanes timeout 90 python3 bench/bench_grid_sampler.py --shape-list 4x16x64x64:64x64,2x8x96x96:96x96,8x24x32x32:48x48 \
    --modes bilinear,bicubic --paddings zeros --dtypes f32,bf16 --runs 30 --out $OUT/g2_lanes$lanes.json > $OUT/g2_lanes$lanes.txt 2>&1
done
cd $OUT && tar czf lanes.tgz g3_* g2_* && rm -f g3_* g2_*
