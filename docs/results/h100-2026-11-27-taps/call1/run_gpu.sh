#!/bin/bash
# Taps in the gather for bicubic at 3-4 channels and bilinear at 6-8 channels
# (ADJOINT_TUNE_BINNED_TAPS, default 16: taps x broadcast elements per cell), measured against
# the default in separate processes of one call; parity and bitwise determinism under the wider
# bound; the compiled Python launch path found beside a staged library. Run from the repository
# root with the build staged in .stage/build. Results in $OUT/taps.tgz and $OUT/summary.txt.
R=$OUT/taps; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)";
  python3 -c 'from adjoint import _fast; m=_fast.module(); print("launch path:", m.__file__ if m else "ctypes: %s" % _fast.reason)'; } > $R/device.txt 2>&1
BIC="32x3x224x224:224x224,16x4x128x128:128x128,4x3x64x64:64x64,16x3x96x96:160x160,8x3x256x256:128x128,8x1x200x200:200x200,2x3x17x23:31x29"
BIL="16x8x128x128:128x128,8x6x96x96:96x96,4x8x256x256:256x256,32x3x224x224:224x224"
for taps in 16 64; do
  ADJOINT_TUNE_BINNED_TAPS=$taps timeout 70 python3 bench/bench_grid_sampler.py --modes bicubic --paddings zeros \
    --shape-list $BIC --runs 30 --warmup 5 --out $R/bic_$taps.json > $R/bic_$taps.txt 2>&1
  el "bicubic taps=$taps"
done
for taps in 16 32; do
  ADJOINT_TUNE_BINNED_TAPS=$taps timeout 40 python3 bench/bench_grid_sampler.py --modes bilinear --paddings zeros \
    --shape-list $BIL --runs 30 --warmup 5 --out $R/bil_$taps.json > $R/bil_$taps.txt 2>&1
  el "bilinear taps=$taps"
done
for taps in 16 64; do
  ADJOINT_TUNE_BINNED_TAPS=$taps timeout 30 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bicubic --dtypes f32 \
    --shape-list 32x3x224x224:224x224 > $R/prof_bic_$taps.txt 2>&1
done
el "profiles"
for taps in 16 64; do
  ADJOINT_TUNE_BINNED_TAPS=$taps timeout 40 python3 tests/gpu/grid_sampler_bits.py --modes bicubic,bilinear --dtypes f32,bf16 \
    --shape-list 32x3x224x224:224x224,16x4x128x128:128x128,16x8x128x128:128x128 > $R/bits_$taps.txt 2>&1
done
el "bits"
ADJOINT_TUNE_BINNED_TAPS=64 timeout 120 python3 -m pytest tests/gpu/test_grid_sampler.py -q -x -n 8 -k "bicubic or bilinear" > $R/pytest_taps64.txt 2>&1
echo "rc=$?" >> $R/pytest_taps64.txt
el "pytest taps=64"
timeout 30 python3 bench/bench_overhead.py > $R/overhead.json 2> $R/overhead.err
el "overhead"
tar -czf $OUT/taps.tgz -C $OUT taps
{ cat $R/progress.txt $R/device.txt; for f in $R/bic_*.txt $R/bil_*.txt; do echo "== $f"; cat $f; done; for f in $R/bits_*.txt; do echo "== $f"; cat $f; done; tail -5 $R/pytest_taps64.txt; cat $R/overhead.json | head -c 3000; } > $OUT/summary.txt 2>&1
