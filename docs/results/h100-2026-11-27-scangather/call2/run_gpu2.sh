#!/bin/bash
# Call 2, the bounds chosen from call 1 (ADJOINT_TUNE_SCAN_GATHER 2^24, _LENGTH 128): gpu-check
# (gtest, tests/gpu with its determinism check, compute-sanitizer), the grid_sampler suites with
# the scan off, and bench_grid_sampler.py binned vs default over call 1's shapes and three more.
# Results in $OUT/scan2.tgz and $OUT/summary.txt.
R=$OUT/scan2; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=400 GPU_CHECK_PYTEST_WORKERS=8 timeout 420 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
ADJOINT_TUNE_SCAN_GATHER=0 timeout 60 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $R/pytest_scan0.txt 2>&1
echo "pytest rc=$?" >> $R/pytest_scan0.txt
el "pytest scan off"
SH=1x1x8x3:37x4,2x2x1x68:8x140,2x3x6x5:5x4,4x3x16x16:16x16,8x1x16x28:2x135,4x5x151x186:2x2,1x3x48x48:48x48,3x2x9x7:3x10,2x16x8x8:4x4,1x1x200x300:8x8
for set in binned:0 default:; do
  name=${set%%:*}; work=${set#*:}
  env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} timeout 50 python3 bench/bench_grid_sampler.py --dtypes f32 --paddings zeros --shape-list $SH --runs 30 --warmup 5 --out $R/grid_$name.json > $R/grid_$name.txt 2>&1
  el "grid $name"
done
tar -czf $OUT/scan2.tgz -C $OUT scan2
{ cat $R/progress.txt $R/device.txt; tail -22 $R/gpu-check.log; tail -3 $R/pytest_scan0.txt; for f in $R/grid_*.txt; do echo "== $f"; tail -n 32 $f; done; } > $OUT/summary.txt 2>&1
