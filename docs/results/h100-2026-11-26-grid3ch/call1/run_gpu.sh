#!/bin/bash
# grid3ch's one GPU call (kind nvidia-h100-x1, <= 240 s): main's kernels (knobs
# ADJOINT_TUNE_WHOLE_AXIS_GROUPS=0 ADJOINT_TUNE_DIRECT_STORE=0) against the new defaults, in one
# process each: bench_grid_sampler.py at 32x3x224^2 (3 modes) and 16x4x128^2, and
# bench_grid_sampler_3d.py (2x16x32^3, whose grad_grid now takes a point's 3 axes); per-kernel
# profiles; bits (3 runs bitwise, hashes compared across the two settings); the GPU parity and
# determinism tests of the changed paths; the unchanged shapes once; then experiments with
# existing knobs (gathered rows off, records per cell 1 for nearest, streaming loads off).
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-grid3ch PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
export PYTHONUNBUFFERED=1
R=/tmp/grid3ch-r; rm -rf $R; mkdir -p $R  # at most 8 files come back: all of it in all.tgz
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
cat build/STAGED >> $R/device.txt 2>/dev/null
cat $R/device.txt >> $S
OLD="ADJOINT_TUNE_WHOLE_AXIS_GROUPS=0 ADJOINT_TUNE_DIRECT_STORE=0"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
step() {  # name limit command...: runs it (within 228 s of the start), logs rc and seconds
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt 228 ] && limit=$((228 - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
# 1. the changed shapes: old vs new
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="ADJOINT_GRID3CH_NEW=1"; fi
  step bench_3ch_$cfg 40 $K $B --modes bilinear,bicubic,nearest --dtypes f32,bf16 \
    --shape-list 32x3x224x224:224x224 --out $R/bench_3ch_$cfg.json
  step bench_4ch_$cfg 20 $K $B --modes bilinear,bicubic --dtypes f32,bf16 \
    --shape-list 16x4x128x128:128x128 --out $R/bench_4ch_$cfg.json
done
# 1b. 3-d (2x16x32^3: grad_grid's 3 axes per thread): old vs new
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="ADJOINT_GRID3CH_NEW=1"; fi
  step bench3d_$cfg 20 $K python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5 \
    --out $R/bench3d_$cfg.json
done
# 2. per-kernel profiles (bilinear, bicubic f32 at 32x3x224^2)
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="ADJOINT_GRID3CH_NEW=1"; fi
  step profile_$cfg 16 $K python3 tests/gpu/grid_sampler_kernel_profile.py --modes bilinear,bicubic \
    --dtypes f32 --shape-list 32x3x224x224:224x224
done
# 3. bits: 3 runs bitwise each, hashes equal across the settings
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="ADJOINT_GRID3CH_NEW=1"; fi
  step bits_$cfg 20 $K python3 tests/gpu/grid_sampler_bits.py
done
cut -d' ' -f1-6 $R/bits_old.txt > $R/bits_old.cut; cut -d' ' -f1-6 $R/bits_new.txt > $R/bits_new.cut
if cmp -s $R/bits_old.cut $R/bits_new.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: old and new hashes EQUAL ($(wc -l < $R/bits_new.cut) cases)" >> $S
else echo "bits: old and new hashes DIFFER" >> $S; diff $R/bits_old.cut $R/bits_new.cut >> $S; fi
# 4. GPU parity + determinism of the changed paths (FEW_CHANNEL_CASES: 128x128 inputs)
step pytest 40 ADJOINT_GRID3CH_NEW=1 python3 -m pytest -q tests/gpu/test_grid_sampler.py \
  tests/gpu/test_grid_sampler_3d.py -k "128 or 32" -p no:cacheprovider
tail -1 $R/pytest.txt >> $S
# 5. unchanged shapes (kernels byte-identical to main's), new defaults only
step bench_other 40 ADJOINT_GRID3CH_NEW=1 $B --modes bilinear --dtypes f32,bf16 \
  --shape-list 4x3x64x64:64x64,2x1x512x512:512x512,8x64x128x128:128x128,4x32x256x256:256x256 \
  --out $R/bench_other.json
# 6. experiments with existing knobs on top of the new defaults
step exp_rows0 15 ADJOINT_TUNE_GATHERED_ROWS=0 $B --modes bilinear --dtypes f32,bf16 \
  --shape-list 32x3x224x224:224x224 --out $R/exp_rows0.json
step exp_rpc1 15 ADJOINT_TUNE_BINNED_RECORDS_PER_CELL=1 $B --modes nearest --dtypes f32,bf16 \
  --shape-list 32x3x224x224:224x224 --out $R/exp_rpc1.json
step exp_stream2 15 ADJOINT_TUNE_STREAMING=2 $B --modes bilinear --dtypes f32,bf16 \
  --shape-list 32x3x224x224:224x224 --out $R/exp_stream2.json
for f in $R/bench3d_*.txt; do echo "== $(basename $f)" >> $S; grep -iE "grid_sampler_3d|error" $f >> $S; done
for f in $R/bench_*.txt $R/exp_*.txt; do
  echo "== $(basename $f)" >> $S; grep -E "grid_sampler_2d_backward |ERROR|Error" $f | awk '{print $2, $4, $5, $6, $7, $8, $9, $10}' >> $S
done
tar -czf $OUT/all.tgz -C /tmp grid3ch-r
cp $R/bench_3ch_old.txt $R/bench_3ch_new.txt $R/profile_old.txt $R/profile_new.txt $OUT/
cat $S
