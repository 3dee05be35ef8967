#!/bin/bash
# Call 1: clamped tap axes (bicubic under border padding keyed by its clamped base, edge
# elements walking key ranges). Old = main's library at 1dd1a06 (.stage/old), new = the change
# (.stage/build). bench_grid_sampler.py bicubic at issue 10's shapes and at other shapes, old
# and new, each its own process; grid_sampler_bits.py (3 runs bitwise, error against ATen) on
# border bicubic; the parity suite's bicubic cases at the defaults and with the taps forced into
# the gather (ADJOINT_TUNE_BINNED_TAPS=1048576, scan off); compute-sanitizer memcheck on a forced
# case. Results in $OUT/clamped1.tgz and $OUT/summary.txt.
R=$OUT/clamped1; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export PYTHONPATH=$PWD/python
NEW=$PWD/.stage/build/lib/libadjoint.so OLD=$PWD/.stage/old/libadjoint.so
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
FORCE="ADJOINT_TUNE_BINNED_TAPS=1048576 ADJOINT_TUNE_SCAN_GATHER=0"
ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-new timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py -k bicubic > $R/pytest_default.txt 2>&1; echo "rc=$?" >> $R/pytest_default.txt
el "pytest default"
env $FORCE ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-force timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py -k "bicubic and border" > $R/pytest_forced.txt 2>&1; echo "rc=$?" >> $R/pytest_forced.txt
el "pytest forced"
ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-new timeout 60 python3 tests/gpu/grid_sampler_bits.py --shape-list 32x3x224x224:224x224,16x4x128x128:128x128,2x3x128x128:128x128 --modes bicubic --paddings border,zeros > $R/bits_new.txt 2>&1; echo "rc=$?" >> $R/bits_new.txt
el "bits"
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L ADJOINT_CACHE_DIR=/tmp/c-$lib timeout 110 python3 bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --runs 30 --warmup 5 --out $R/grid_$lib.json > $R/grid_$lib.txt 2>&1
  el "bench $lib"
done
SH=16x4x128x128:128x128,16x3x96x96:160x160,2x3x128x128:128x128,8x2x200x150:120x180,1x1x512x512:512x512,4x3x64x64:256x256,64x3x32x32:32x32,2x8x96x96:96x96,1x3x33x47:65x41
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L ADJOINT_CACHE_DIR=/tmp/c-$lib timeout 80 python3 bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --paddings border --shape-list $SH --runs 30 --warmup 5 --out $R/other_$lib.json > $R/other_$lib.txt 2>&1
  el "other $lib"
done
env $FORCE ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-san timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/grid_sampler_bits.py --shape-list 2x3x40x40:48x48 --modes bicubic --paddings border --dtypes f32,bf16 > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt
el "memcheck"
tar -czf $OUT/clamped1.tgz -C $OUT clamped1
{ cat $R/progress.txt $R/device.txt; for f in $R/pytest_*.txt $R/bits_new.txt $R/memcheck.txt; do echo "== $f"; tail -n 8 $f; done; for f in $R/grid_*.txt $R/other_*.txt; do echo "== $f"; tail -n 45 $f; done; } > $OUT/summary.txt 2>&1
