#!/bin/bash
# Temporary arena A/B: ADJOINT_TUNE_TEMPORARY_ARENA=0 (before) vs 1, same machine, fresh processes.
cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
SHAPES=4x1x1x1:22x7,2x2x3x7:100x15,2x1x9x182:254x33,8x3x4x244:2x1,2x3x4x6:19x181,8x64x128x128:128x128
for arena in 0 1 0 1; do
  ADJOINT_TUNE_TEMPORARY_ARENA=$arena ADJOINT_CACHE_DIR=/tmp/cache timeout 80 python3 bench/bench_grid_sampler.py \
    --shape-list $SHAPES --modes bilinear,nearest --paddings zeros --dtypes f32 --runs 60 --warmup 5 \
    --out $OUT/grid_arena$arena.json >> $OUT/grid_arena$arena.txt 2>&1
  echo "arena $arena rc=$?" >> $OUT/grid_arena$arena.txt
  cp $OUT/grid_arena$arena.json $OUT/grid_arena${arena}_$SECONDS.json
done
for arena in 0 1; do
  ADJOINT_TUNE_TEMPORARY_ARENA=$arena ADJOINT_CACHE_DIR=/tmp/cache timeout 100 python3 bench/bench_mhc.py \
    --filter mhc_pre_backward --no-compile --runs 50 --budget 80 --out $OUT/mhc_arena$arena.json --chart /tmp/x$arena.png > $OUT/mhc_arena$arena.txt 2>&1
  echo "arena $arena rc=$?" >> $OUT/mhc_arena$arena.txt
done
cd $OUT && tar czf arena.tgz grid_arena* mhc_arena* && rm -f grid_arena* mhc_arena*
