#!/bin/bash
# Final verification, call B (main with the few-token block splits, after call A's gpu-check):
# bench.py --runs 60 (every op vs PyTorch, kernel and Python call, mHC vs eager and
# torch.compile, the jit bench), then bench_dynamic.py's time part if time is left.
# Results in $OUT/finalB.tgz and $OUT/summary.txt.
R=$OUT/finalB; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)";
  python3 -c 'from adjoint import _fast; m=_fast.module(); print("launch path:", m.__file__ if m else "ctypes: %s" % _fast.reason)'; } > $R/device.txt 2>&1
timeout 400 python3 bench/bench.py --out $R/bench.json --chart $R/bench.png --runs 60 \
  --jit-bench $PWD/.stage/build/bin/adjoint_jit_bench > $R/console.txt 2>&1
echo "bench rc=$?" >> $R/console.txt
el "bench"
timeout 90 python3 bench/bench_dynamic.py --parts time --out $R/dynamic.json > $R/dynamic.txt 2>&1
echo "dynamic rc=$?" >> $R/dynamic.txt
el "dynamic"
tar -czf $OUT/finalB.tgz -C $OUT finalB
{ cat $R/progress.txt $R/device.txt; tail -60 $R/console.txt; tail -15 $R/dynamic.txt; } > $OUT/summary.txt 2>&1
