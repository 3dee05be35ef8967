#!/bin/bash
# The scanned gather (small data-dependent scatters as one gather kernel that scans its records):
# gpu-check on the new defaults (gtest, the tests/gpu parity suite with its determinism check,
# compute-sanitizer); the grid_sampler suites again with the scan off (ADJOINT_TUNE_SCAN_GATHER=0:
# the binned gather at the small sizes the suites use); then bench_grid_sampler.py over small and
# middling shapes under three settings, each in its own process: binned (SCAN_GATHER=0), the
# default bounds, and forced (bounds far above every case). 3-d: two small cases, binned vs default.
# Results in $OUT/scan.tgz and $OUT/summary.txt.
R=$OUT/scan; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
GPU_CHECK_SECONDS=260 GPU_CHECK_PYTEST_WORKERS=8 timeout 280 scripts/gpu-check "$R/out" gtest,pytest,sanitize > $R/gpu-check.log 2>&1
echo "gpu-check rc=$?" >> $R/gpu-check.log
el "gpu-check"
ADJOINT_TUNE_SCAN_GATHER=0 timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $R/pytest_scan0.txt 2>&1
echo "pytest rc=$?" >> $R/pytest_scan0.txt
el "pytest scan off"
SH=1x1x8x3:37x4,2x2x1x68:8x140,2x3x6x5:5x4,4x3x16x16:16x16,2x3x24x24:24x24,1x8x32x32:32x32,8x1x16x28:2x135,4x5x151x186:2x2,2x3x32x4:9x118,1x3x48x48:48x48,4x3x64x64:64x64
for set in binned:0:4096 default:: forced:1073741824:1048576; do
  name=${set%%:*}; rest=${set#*:}; work=${rest%%:*}; len=${rest#*:}
  env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} ${len:+ADJOINT_TUNE_SCAN_GATHER_LENGTH=$len} timeout 75 python3 bench/bench_grid_sampler.py --dtypes f32 --paddings zeros --shape-list $SH --runs 30 --warmup 5 --out $R/grid_$name.json > $R/grid_$name.txt 2>&1
  el "grid $name"
done
for s in 1x3x4x6x5:3x5x4 2x2x8x8x8:8x8x8; do
  for set in binned:0 default:; do
    name=${set%%:*}; work=${set#*:}
    env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} timeout 30 python3 bench/bench_grid_sampler_3d.py --sizes $s --runs 30 --out $R/g3_${s}_$name.json > $R/g3_${s}_$name.txt 2>&1
  done
done
el "3-d"
tar -czf $OUT/scan.tgz -C $OUT scan
{ cat $R/progress.txt $R/device.txt; tail -22 $R/gpu-check.log; tail -3 $R/pytest_scan0.txt; for f in $R/grid_*.txt; do echo "== $f"; tail -n 40 $f; done; for f in $R/g3_*.txt; do echo "== $f"; tail -n 6 $f; done; } > $OUT/summary.txt 2>&1
