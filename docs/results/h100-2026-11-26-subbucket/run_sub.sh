#!/bin/bash
# Sub-bucket A/B: knob 0 (the sort of before) vs default, same machine, then parity + determinism.
cd "$(dirname "$0")/.." 
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
SHAPES=1x2x3x4:297x261,2x32x2x6:209x142,2x32x8x8:256x256,1x3x4x4:512x512,4x16x16x16:256x256
for knob in 0 16; do
  ADJOINT_TUNE_BINNED_SUBBUCKET=$knob ADJOINT_CACHE_DIR=/tmp/cache$knob timeout 100 python3 bench/bench_grid_sampler.py \
    --shape-list $SHAPES --paddings zeros --dtypes f32,bf16 --runs 20 --warmup 3 \
    --out $OUT/sub$knob.json > $OUT/sub$knob.txt 2>&1
  echo "knob $knob rc=$?" >> $OUT/sub$knob.txt
done
ADJOINT_CACHE_DIR=/tmp/cachep timeout 150 python3 -m pytest -q -x $(python3 -c 'import xdist' 2>/dev/null && printf -- '-n 8') tests/gpu/test_grid_sampler.py > $OUT/pytest_grid.txt 2>&1
echo "pytest rc=$?" >> $OUT/pytest_grid.txt
