#!/bin/bash
# Final bench.py --runs 60 on the committed change (every op side by side with PyTorch).
# Results in $OUT/bench.tgz and $OUT/summary.txt.
R=$OUT/bench; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
timeout 560 python3 bench/bench.py --out $R/bench.json --chart $R/bench.png --runs 60 > $R/console.txt 2>&1
echo "bench rc=$?" >> $R/console.txt
tar -czf $OUT/bench.tgz -C $OUT bench
{ cat $R/device.txt; tail -80 $R/console.txt; } > $OUT/summary.txt 2>&1
