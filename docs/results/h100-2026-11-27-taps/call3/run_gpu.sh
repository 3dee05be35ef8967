#!/bin/bash
# Call 3: progressive group sums (ADJOINT_TUNE_PROGRESSIVE_SUMS: the gather's bucket walks added
# as they are computed, so the accumulators die as they go: bicubic 3-channel gather 181 -> 40
# registers) against the sums at the end, in separate processes, at the bench shapes and the
# wider tap bound's shapes; the output hashes under both (must be equal); pytest of 2-d and 3-d
# grid_sampler under the defaults. Results in $OUT/taps3.tgz and $OUT/summary.txt.
R=$OUT/taps3; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; cat .stage/build/STAGED; } > $R/device.txt 2>&1
BIC="32x3x224x224:224x224,16x4x128x128:128x128,16x3x96x96:160x160,8x64x128x128:128x128,4x32x256x256:256x256"
BIL="8x64x128x128:128x128,4x32x256x256:256x256,32x3x224x224:224x224,16x8x128x128:128x128"
for k in 1 0; do
  ADJOINT_TUNE_PROGRESSIVE_SUMS=$k timeout 70 python3 bench/bench_grid_sampler.py --modes bicubic --paddings zeros \
    --shape-list $BIC --runs 30 --warmup 5 --out $R/bic_$k.json > $R/bic_$k.txt 2>&1
  ADJOINT_TUNE_PROGRESSIVE_SUMS=$k timeout 50 python3 bench/bench_grid_sampler.py --modes bilinear,nearest --paddings zeros \
    --shape-list $BIL --runs 30 --warmup 5 --out $R/bil_$k.json > $R/bil_$k.txt 2>&1
  for sz in 2x16x32x32x32:32x32x32 2x8x32x32x32:32x32x32; do
    ADJOINT_TUNE_PROGRESSIVE_SUMS=$k timeout 30 python3 bench/bench_grid_sampler_3d.py --sizes $sz --runs 30 --warmup 5 \
      --out $R/tri_${k}_${sz//:/_}.json > $R/tri_${k}_${sz//:/_}.txt 2>&1
  done
  ADJOINT_TUNE_PROGRESSIVE_SUMS=$k timeout 40 python3 tests/gpu/grid_sampler_bits.py --modes bicubic,bilinear --dtypes f32,bf16 \
    --shape-list 32x3x224x224:224x224,16x4x128x128:128x128,8x64x128x128:128x128,2x8x32x32x32:32x32x32 > $R/bits_$k.txt 2>&1
  el "progressive=$k"
done
timeout 200 python3 -m pytest tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py -q -x -n 8 > $R/pytest.txt 2>&1
echo "rc=$?" >> $R/pytest.txt
el "pytest"
tar -czf $OUT/taps3.tgz -C $OUT taps3
{ cat $R/progress.txt; for f in $R/bic_*.txt $R/bil_*.txt; do echo "== $f"; cut -c1-110 $f; done; for f in $R/tri_*.txt; do echo "== $f"; tail -5 $f | cut -c1-110; done; diff <(cut -d' ' -f1-7 $R/bits_1.txt) <(cut -d' ' -f1-7 $R/bits_0.txt) && echo "bits: same hashes"; cat $R/bits_1.txt | cut -c1-150; tail -4 $R/pytest.txt; } > $OUT/summary.txt 2>&1
