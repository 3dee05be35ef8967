#!/bin/bash
# Call 3: what the scanned gather costs the grid_sampler test suites (compiles included: each
# setting has an empty cache of its own), scan off (the default) against the measured bounds
# (ADJOINT_TUNE_SCAN_GATHER=16777216, _LENGTH 128) and against those bounds under an unroll budget
# (ADJOINT_TUNE_UNROLL_BUDGET=64); pytest --durations; then the bench shapes of call 2 under the
# budget. Results in $OUT/scan3.tgz and $OUT/summary.txt.
R=$OUT/scan3; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; nproc; } > $R/device.txt 2>&1
for set in off:: on:16777216: budget:16777216:64; do
  name=${set%%:*}; rest=${set#*:}; work=${rest%%:*}; budget=${rest#*:}
  ADJOINT_CACHE_DIR=/tmp/cache-$name env ${work:+ADJOINT_TUNE_SCAN_GATHER=$work} ${budget:+ADJOINT_TUNE_UNROLL_BUDGET=$budget} \
    timeout 170 python3 -m pytest -q -n 8 -p no:cacheprovider --durations=12 tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $R/pytest_$name.txt 2>&1
  echo "pytest rc=$?" >> $R/pytest_$name.txt
  el "pytest $name"
done
SH=1x1x8x3:37x4,2x3x6x5:5x4,4x3x16x16:16x16,8x1x16x28:2x135,4x5x151x186:2x2,3x2x9x7:3x10,2x16x8x8:4x4,1x1x200x300:8x8
ADJOINT_CACHE_DIR=/tmp/cache-budget ADJOINT_TUNE_SCAN_GATHER=16777216 ADJOINT_TUNE_UNROLL_BUDGET=64 timeout 60 python3 bench/bench_grid_sampler.py --dtypes f32 --paddings zeros --shape-list $SH --runs 30 --warmup 5 --out $R/grid_budget.json > $R/grid_budget.txt 2>&1
el "grid budget"
tar -czf $OUT/scan3.tgz -C $OUT scan3
{ cat $R/progress.txt $R/device.txt; for f in $R/pytest_*.txt; do echo "== $f"; tail -n 18 $f; done; tail -n 26 $R/grid_budget.txt; } > $OUT/summary.txt 2>&1
