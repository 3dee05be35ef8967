#!/bin/bash
# The session of 2026-12-02's one device call (580 s of device time were left): gpu-check
# (gtest, the tests/gpu parity suites with the determinism check, compute-sanitizer) on the
# staged build, then bench.py with fewer runs and a shorter mHC budget than the default so that
# both fit. Results in $OUT/check.tgz, $OUT/bench.tgz and $OUT/summary.txt.
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $OUT/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $OUT/device.txt 2>&1
C=$OUT/check; mkdir -p $C
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=215 GPU_CHECK_PYTEST_WORKERS=8 timeout 230 scripts/gpu-check "$C" gtest,pytest,sanitize > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
el "gpu-check"
tar -czf $OUT/check.tgz -C $OUT check
B=$OUT/bench; mkdir -p $B
ADJOINT_CACHE_DIR=/tmp/adjoint-cache timeout 200 python3 bench/bench.py --out $B/bench.json --chart $B/bench.png --runs 50 --warmup 5 --mhc-budget 80 > $B/console.txt 2>&1
echo "bench rc=$?" >> $B/console.txt
el "bench"
tar -czf $OUT/bench.tgz -C $OUT bench
{ cat $OUT/progress.txt $OUT/device.txt; tail -22 $C/gpu-check.out; grep -vE "warn|^ |^$|softmax|Inductor|split the" $B/console.txt | tail -130 | cut -c1-150; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
