#!/bin/bash
# Final verification, call 2 (merged main: wider tap bound, progressive sums, dxspan, binscan,
# gridknobs): parity of the grid_sampler suites and bitwise determinism on the merged kernels
# (binscan and gridknobs came after call 1's gpu-check), then bench.py (every op vs PyTorch,
# kernel and Python call, mHC vs eager and torch.compile, the jit bench), then bench_dynamic.py's
# time part (generic vs specialized) if time is left. Results in $OUT/final.tgz, $OUT/summary.txt.
R=$OUT/final; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)";
  python3 -c 'from adjoint import _fast; m=_fast.module(); print("launch path:", m.__file__ if m else "ctypes: %s" % _fast.reason)'; } > $R/device.txt 2>&1
timeout 120 python3 -m pytest tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py tests/gpu/test_mhc.py -q -n 8 > $R/pytest.txt 2>&1
echo "rc=$?" >> $R/pytest.txt
el "pytest"
timeout 40 python3 tests/gpu/grid_sampler_bits.py --modes bicubic,bilinear,nearest --dtypes f32,bf16 \
  --shape-list 32x3x224x224:224x224,16x4x128x128:128x128,8x64x128x128:128x128,2x16x32x32x32:32x32x32 > $R/bits.txt 2>&1
el "bits"
timeout 330 python3 bench/bench.py --out $R/bench.json --chart $R/bench.png --runs 60 \
  --jit-bench $PWD/.stage/build/bin/adjoint_jit_bench > $R/console.txt 2>&1
echo "bench rc=$?" >> $R/console.txt
el "bench"
timeout 75 python3 bench/bench_dynamic.py --parts time --out $R/dynamic.json > $R/dynamic.txt 2>&1
echo "dynamic rc=$?" >> $R/dynamic.txt
el "dynamic"
tar -czf $OUT/final.tgz -C $OUT final
{ cat $R/progress.txt $R/device.txt; tail -3 $R/pytest.txt; grep -c "bitwise_3_runs=True" $R/bits.txt; grep -c "bitwise_3_runs=False" $R/bits.txt; tail -60 $R/console.txt; tail -15 $R/dynamic.txt; } > $OUT/summary.txt 2>&1
