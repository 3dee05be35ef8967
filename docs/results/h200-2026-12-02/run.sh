#!/bin/bash
# The session of 2026-12-02's one device call (580 s of device time were left): gpu-check's
# gtest and pytest steps (the tests/gpu parity suites with the determinism check) on the staged
# build, then bench.py with fewer runs and a shorter mHC budget than the default, then
# gpu-check's compute-sanitizer step in whatever time is left. Results in $OUT/check.tgz,
# $OUT/bench.tgz, $OUT/sanitize.tgz and $OUT/summary.txt.
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $OUT/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; nproc; } > $OUT/device.txt 2>&1
C=$OUT/check; mkdir -p $C
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=140 GPU_CHECK_PYTEST_WORKERS=12 timeout 150 scripts/gpu-check "$C" gtest,pytest > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
el "gpu-check gtest,pytest"
tar -czf $OUT/check.tgz -C $OUT check
B=$OUT/bench; mkdir -p $B
ADJOINT_CACHE_DIR=/tmp/adjoint-cache timeout 250 python3 bench/bench.py --out $B/bench.json --chart $B/bench.png --runs 50 --warmup 5 --mhc-budget 60 > $B/console.txt 2>&1
echo "bench rc=$?" >> $B/console.txt
el "bench"
tar -czf $OUT/bench.tgz -C $OUT bench
S=$OUT/sanitize; mkdir -p $S
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=100 timeout 110 scripts/gpu-check "$S" sanitize > $S/gpu-check.out 2>&1
echo "gpu-check sanitize rc=$?" >> $S/gpu-check.out
el "sanitize"
tar -czf $OUT/sanitize.tgz -C $OUT sanitize
{ cat $OUT/progress.txt $OUT/device.txt; tail -14 $C/gpu-check.out; tail -4 $S/gpu-check.out; grep -vE "warn|^ |^$|softmax|Inductor|split the" $B/console.txt | tail -140 | cut -c1-150; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
