#!/bin/bash
# Call 4: the scanned gather on by default (2^24 / 128) with its kernels kept out of row groups and
# under their own unroll budget (ADJOINT_TUNE_SCAN_GATHER_UNROLL=512): gpu-check (gtest, tests/gpu
# with its determinism check, compute-sanitizer), the grid_sampler suites with --durations (empty
# cache) on the default and with the scan off, and bench_grid_sampler.py binned vs default.
# Results in $OUT/scan4.tgz and $OUT/summary.txt.
R=$OUT/scan4; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
for set in default: off:0; do
  name=${set%%:*}; work=${set#*:}
  ADJOINT_CACHE_DIR=/tmp/suite-$name env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} timeout 120 python3 -m pytest -q -n 8 -p no:cacheprovider --durations=8 tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $R/pytest_$name.txt 2>&1
  echo "pytest rc=$?" >> $R/pytest_$name.txt
  el "suites $name"
done
SH=1x1x8x3:37x4,2x3x6x5:5x4,4x3x16x16:16x16,8x1x16x28:2x135,4x5x151x186:2x2,3x2x9x7:3x10,2x16x8x8:4x4,1x1x200x300:8x8,2x1x32x32:4x8
for set in binned:0 default:; do
  name=${set%%:*}; work=${set#*:}
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} timeout 50 python3 bench/bench_grid_sampler.py --dtypes f32,bf16 --paddings zeros --shape-list $SH --runs 30 --warmup 5 --out $R/grid_$name.json > $R/grid_$name.txt 2>&1
  el "grid $name"
done
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=330 GPU_CHECK_PYTEST_WORKERS=8 timeout 350 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
tar -czf $OUT/scan4.tgz -C $OUT scan4
{ cat $R/progress.txt $R/device.txt; tail -22 $R/gpu-check.log; for f in $R/pytest_*.txt; do echo "== $f"; tail -n 12 $f; done; for f in $R/grid_*.txt; do echo "== $f"; tail -n 40 $f; done; } > $OUT/summary.txt 2>&1
