#!/bin/bash
# Call 2: main's library (OLD, .stage/old: the NaN select) against this change's (NEW), each in
# its own processes: mhc_pre_backward and mhc_pre per kernel at issue 9's shapes
# (tests/gpu/mhc_backward_sweep.py, output digests), bf16 special values through dx, and the
# bf16 grid sampler at the bench shapes; then bench.py --runs 60 on NEW.
# Results in $OUT/ab.tgz and $OUT/summary.txt.
R=$OUT/ab; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
NEW=$PWD/.stage/build/lib/libadjoint.so OLD=$PWD/.stage/old/libadjoint.so
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$NEW \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)";
  python3 -c 'from adjoint import _fast; m=_fast.module(); print("launch path:", m.__file__ if m else "ctypes: %s" % _fast.reason)'; } > $R/device.txt 2>&1
timeout 150 python3 tests/gpu/mhc_backward_sweep.py --runs 20 --budget 140 old:ADJOINT_LIBRARY=$OLD new:ADJOINT_LIBRARY=$NEW > $R/sweep_backward.txt 2>&1
el "backward sweep"
timeout 100 python3 tests/gpu/mhc_backward_sweep.py --op mhc_pre --runs 20 --budget 90 old:ADJOINT_LIBRARY=$OLD new:ADJOINT_LIBRARY=$NEW > $R/sweep_pre.txt 2>&1
el "forward sweep"
timeout 40 python3 tests/gpu/bf16_special_values.py old:ADJOINT_LIBRARY=$OLD new:ADJOINT_LIBRARY=$NEW > $R/special.txt 2>&1
el "special values"
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L timeout 60 python3 bench/bench_grid_sampler.py --dtypes bf16 --modes bilinear,nearest,bicubic --paddings zeros --runs 30 --out $R/grid_$lib.json > $R/grid_$lib.txt 2>&1
done
el "grid sampler"
timeout 330 python3 bench/bench.py --out $R/bench.json --chart $R/bench.png --runs 60 > $R/console.txt 2>&1
echo "bench rc=$?" >> $R/console.txt
el "bench"
tar -czf $OUT/ab.tgz -C $OUT ab
{ cat $R/progress.txt $R/device.txt; grep -v "^ " $R/sweep_backward.txt | tail -60; tail -30 $R/sweep_pre.txt; cat $R/special.txt; tail -12 $R/grid_old.txt $R/grid_new.txt; tail -40 $R/console.txt; } > $OUT/summary.txt 2>&1
