#!/bin/bash
# Call 2: the wider tap bound as a rule (ADJOINT_TUNE_BINNED_TAPS_WIDE, default 64: taps x
# channels <= 64 where points >= cells and the gather has >= 65,536 elements) against the old
# default (TAPS_WIDE=0) and against the bound without conditions (TAPS=64), in separate
# processes, at shapes call 1 did not measure: its edges (bilinear 12-16 channels, 3-d
# trilinear 4-8 channels, bicubic near the conditions' limits). Parity: pytest of 2-d and 3-d
# under the new default. Results in $OUT/taps2.tgz and $OUT/summary.txt.
R=$OUT/taps2; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; cat .stage/build/STAGED; } > $R/device.txt 2>&1
BIL="8x16x128x128:128x128,4x16x64x96:64x96,8x12x96x96:96x96,16x8x128x128:128x128"
BIC="2x3x128x128:128x128,8x3x181x181:128x128,1x3x64x64:256x256,16x4x128x128:128x128,4x4x200x120:150x90"
SETTINGS=("rule:" "old:ADJOINT_TUNE_BINNED_TAPS_WIDE=0" "forced:ADJOINT_TUNE_BINNED_TAPS=64")
for s in "${SETTINGS[@]}"; do
  name=${s%%:*}; envs=${s#*:}
  env $envs timeout 50 python3 bench/bench_grid_sampler.py --modes bilinear --paddings zeros,border \
    --shape-list $BIL --runs 30 --warmup 5 --out $R/bil_$name.json > $R/bil_$name.txt 2>&1
  env $envs timeout 60 python3 bench/bench_grid_sampler.py --modes bicubic --paddings zeros \
    --shape-list $BIC --runs 30 --warmup 5 --out $R/bic_$name.json > $R/bic_$name.txt 2>&1
  for sz in 2x8x32x32x32:32x32x32 2x4x32x32x32:32x32x32 1x6x24x24x24:24x24x24; do
    env $envs timeout 30 python3 bench/bench_grid_sampler_3d.py --sizes $sz --runs 30 --warmup 5 \
      --out $R/tri_${name}_$sz.json > $R/tri_${name}_$sz.txt 2>&1
  done
  el "$name"
done
timeout 150 python3 -m pytest tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py -q -x -n 8 -k "bicubic or bilinear" > $R/pytest_rule.txt 2>&1
echo "rc=$?" >> $R/pytest_rule.txt
el "pytest"
timeout 40 python3 tests/gpu/grid_sampler_bits.py --modes bicubic,bilinear --dtypes f32,bf16 \
  --shape-list 16x4x128x128:128x128,8x16x128x128:128x128,2x8x32x32x32:32x32x32 > $R/bits_rule.txt 2>&1
el "bits"
tar -czf $OUT/taps2.tgz -C $OUT taps2
{ cat $R/progress.txt; for f in $R/bil_*.txt $R/bic_*.txt; do echo "== $f"; cut -c1-120 $f; done; for f in $R/tri_*.txt; do echo "== $f"; head -12 $f | cut -c1-150; done; cat $R/bits_rule.txt; tail -4 $R/pytest_rule.txt; } > $OUT/summary.txt 2>&1
