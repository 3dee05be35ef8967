#!/bin/bash
# Final check on the committed change (edges kernel with rolled loops): gpu-check (gtest,
# the tests/gpu parity suites with the determinism check, compute-sanitizer), then
# bench_grid_sampler.py bicubic at issue 10's shapes and border bicubic at other shapes, and a
# cold prepare of the 32x3x224^2 border program. Results in $OUT/check.tgz and $OUT/summary.txt.
R=$OUT/check; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
ADJOINT_CACHE_DIR=/tmp/cold python3 -c "
import time, adjoint
spec = adjoint.spec.grid_sampler_2d_backward('f32', [32, 3, 224, 224], [224, 224], 'bicubic', 'border', False, [True, True])
t = time.perf_counter(); adjoint.prepare(spec); print('cold prepare of bicubic border 32x3x224^2: %.0f ms' % ((time.perf_counter() - t) * 1e3))
spec = adjoint.spec.grid_sampler_2d_backward('f32', [32, 3, 224, 224], [224, 224], 'bicubic', 'zeros', False, [True, True])
t = time.perf_counter(); adjoint.prepare(spec); print('cold prepare of bicubic zeros 32x3x224^2: %.0f ms' % ((time.perf_counter() - t) * 1e3))
" > $R/cold.txt 2>&1
el "cold"
ADJOINT_CACHE_DIR=/tmp/c timeout 100 python3 bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --runs 30 --warmup 5 --out $R/grid.json > $R/grid.txt 2>&1
el "bench bicubic"
SH=16x4x128x128:128x128,16x3x96x96:160x160,2x3x128x128:128x128,1x1x512x512:512x512,64x3x32x32:32x32
ADJOINT_CACHE_DIR=/tmp/c timeout 80 python3 -u bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --paddings border --shape-list $SH --runs 30 --warmup 5 --out $R/other.json > $R/other.txt 2>&1
el "other"
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=330 GPU_CHECK_PYTEST_WORKERS=8 timeout 350 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
tar -czf $OUT/check.tgz -C $OUT check
{ cat $R/progress.txt $R/device.txt $R/cold.txt; tail -22 $R/gpu-check.log; grep -v "^device" $R/grid.txt | tail -19 | cut -c1-150; grep -v "^device" $R/other.txt | tail -11 | cut -c1-150; } > $OUT/summary.txt 2>&1
