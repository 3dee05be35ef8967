#!/bin/bash
# Call 2: clamped tap axes, second design (the gather walks one span per tap; the outer clamped
# component's extra keys on its two edges are a kernel of their own, <T>_bin_edges, which the
# gather adds on the edges; chunk sums also inside a row's edge spans). Old = main's library at
# 1dd1a06 (.stage/old), new = the change (.stage/build). The grid_sampler parity suites (2-d,
# 3-d) at the defaults, the bicubic border cases with the taps forced into the gather (scan
# off); grid_sampler_bits.py on border bicubic; bench_grid_sampler.py bicubic at issue 10's
# shapes and at other shapes, old and new, each its own process; cold prepare time of the
# 32x3x224^2 border program; compute-sanitizer memcheck on a forced case.
R=$OUT/clamped2; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export PYTHONPATH=$PWD/python
NEW=$PWD/.stage/build/lib/libadjoint.so OLD=$PWD/.stage/old/libadjoint.so
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; } > $R/device.txt 2>&1
FORCE="ADJOINT_TUNE_BINNED_TAPS=1048576 ADJOINT_TUNE_SCAN_GATHER=0"
ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-new timeout 100 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $R/pytest_default.txt 2>&1; echo "rc=$?" >> $R/pytest_default.txt
el "pytest default"
env $FORCE ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-force timeout 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py -k "bicubic and border" > $R/pytest_forced.txt 2>&1; echo "rc=$?" >> $R/pytest_forced.txt
el "pytest forced"
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L ADJOINT_CACHE_DIR=/tmp/cold-$lib python3 -c "
import time, adjoint
spec = adjoint.spec.grid_sampler_2d_backward('f32', [32, 3, 224, 224], [224, 224], 'bicubic', 'border', False, [True, True])
t = time.perf_counter(); adjoint.prepare(spec); print('$lib cold prepare of bicubic border 32x3x224^2: %.0f ms' % ((time.perf_counter() - t) * 1e3))
" >> $R/cold.txt 2>&1
done
el "cold"
ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-new timeout 100 python3 tests/gpu/grid_sampler_bits.py --shape-list 32x3x224x224:224x224,16x4x128x128:128x128,2x3x128x128:128x128 --modes bicubic --paddings border > $R/bits_new.txt 2>&1; echo "rc=$?" >> $R/bits_new.txt
el "bits"
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L ADJOINT_CACHE_DIR=/tmp/c-$lib timeout 100 python3 bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --runs 30 --warmup 5 --out $R/grid_$lib.json > $R/grid_$lib.txt 2>&1
  el "bench $lib"
done
SH=16x4x128x128:128x128,16x3x96x96:160x160,2x3x128x128:128x128,8x2x200x150:120x180,1x1x512x512:512x512,4x3x64x64:256x256,64x3x32x32:32x32,2x8x96x96:96x96,1x3x33x47:65x41
for lib in old new; do
  L=$OLD; [ $lib = new ] && L=$NEW
  ADJOINT_LIBRARY=$L ADJOINT_CACHE_DIR=/tmp/c-$lib timeout 120 python3 -u bench/bench_grid_sampler.py --dtypes f32,bf16 --modes bicubic --paddings border --shape-list $SH --runs 30 --warmup 5 --out $R/other_$lib.json > $R/other_$lib.txt 2>&1
  el "other $lib"
done
env $FORCE ADJOINT_LIBRARY=$NEW ADJOINT_CACHE_DIR=/tmp/c-san timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 python3 tests/gpu/grid_sampler_bits.py --shape-list 2x3x40x40:48x48 --modes bicubic --paddings border --dtypes f32 > $R/memcheck.txt 2>&1; echo "rc=$?" >> $R/memcheck.txt
el "memcheck"
tar -czf $OUT/clamped2.tgz -C $OUT clamped2
{ cat $R/progress.txt $R/device.txt $R/cold.txt; for f in $R/pytest_*.txt $R/bits_new.txt $R/memcheck.txt; do echo "== $f"; tail -n 5 $f; done; for f in $R/grid_*.txt $R/other_*.txt; do echo "== $f"; grep -v "^device" $f | tail -n 25 | cut -c1-150; done; } > $OUT/summary.txt 2>&1
