#!/bin/bash
# gridnear's second GPU call (kind nvidia-h100-x1, <= 240 s) on the branch's build: the old rule
# (ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST=0, main's kernels byte for byte) against the new
# default in one process each: bench_grid_sampler.py nearest at issue 10's shapes and the
# few-channel ones, bench_grid_sampler_3d.py; the GPU parity + determinism suites of nearest;
# bits (3 runs bitwise, hashes compared across the two settings); per-kernel profiles of the new
# programs; then existing knobs on top of the new defaults as leads.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridnear PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
export PYTHONUNBUFFERED=1
R=/tmp/gridnear-r; rm -rf $R; mkdir -p $R
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
cat build/STAGED >> $R/device.txt 2>/dev/null
cat $R/device.txt >> $S
OLD="ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST=0"
NEW="ADJOINT_GRIDNEAR_NEW=1"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
SH3=8x64x128x128:128x128,4x32x256x256:256x256,32x3x224x224:224x224
SHX=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128,8x8x128x128:128x128,4x16x128x128:128x128
BITS=8x64x128x128:128x128,4x32x256x256:256x256,16x4x128x128:128x128,8x8x128x128:128x128
step() {  # name limit command...: runs it (within 230 s of the start), logs rc and seconds
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt 230 ] && limit=$((230 - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
# 1. A/B, old rule then new, same process settings otherwise
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="$NEW"; fi
  step bench_$cfg 25 $K $B --modes nearest --dtypes f32,bf16 --shape-list $SH3,$SHX --out $R/bench_$cfg.json
  step bench3d_$cfg 12 $K $B3 --out $R/bench3d_$cfg.json
done
# 2. GPU parity + bitwise determinism (3 runs) of every nearest case, 2-d and 3-d, new defaults
XD=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
step pytest 95 $NEW python3 -m pytest -q $XD tests/gpu/test_grid_sampler.py \
  tests/gpu/test_grid_sampler_3d.py -k nearest -p no:cacheprovider
tail -1 $R/pytest.txt >> $S
# 3. bits: 3 runs bitwise each, hashes equal across the settings (the same sums in the same order)
for cfg in old new; do
  if [ $cfg = old ]; then K="$OLD"; else K="$NEW"; fi
  step bits_$cfg 15 $K python3 tests/gpu/grid_sampler_bits.py --modes nearest --shape-list $BITS
done
cut -d' ' -f1-6 $R/bits_old.txt > $R/bits_old.cut; cut -d' ' -f1-6 $R/bits_new.txt > $R/bits_new.cut
if cmp -s $R/bits_old.cut $R/bits_new.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: old and new hashes EQUAL ($(wc -l < $R/bits_new.cut) cases)" >> $S
else echo "bits: old and new hashes DIFFER" >> $S; diff $R/bits_old.cut $R/bits_new.cut >> $S; fi
grep -c "bitwise_3_runs=True" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=True lines: /' >> $S
# 4. per-kernel profiles of the new programs
step profile_new 16 $NEW $P --modes nearest --dtypes f32 --shape-list 8x64x128x128:128x128,4x32x256x256:256x256,8x8x128x128:128x128
step profile3d_new 10 $NEW $P --three-d --dtypes f32 --shapes ""
# 5. leads: existing knobs on top of the new defaults
step exp_vec32 9 ADJOINT_TUNE_VECTOR_BYTES=32 $B --modes nearest --dtypes f32,bf16 --shape-list 8x64x128x128:128x128,4x32x256x256:256x256 --out $R/exp_vec32.json
step exp_block512 9 ADJOINT_TUNE_BLOCK_SIZE=512 $B --modes nearest --dtypes f32,bf16 --shape-list 8x64x128x128:128x128,4x32x256x256:256x256 --out $R/exp_block512.json
step exp3d_unroll4 8 ADJOINT_TUNE_PARTIAL_UNROLL=4 $B3 --out $R/exp3d_unroll4.json
step exp3d_block128 8 ADJOINT_TUNE_BLOCK_SIZE=128 $B3 --out $R/exp3d_block128.json
step exp3d_rows0 8 ADJOINT_TUNE_GATHERED_ROWS=0 $B3 --out $R/exp3d_rows0.json
for f in $R/bench3d_*.txt $R/exp3d_*.txt; do echo "== $(basename $f)" >> $S; grep -iE "^grid_sampler_3d|error" $f | grep -v "%" >> $S; done
for f in $R/bench_*.txt $R/exp_*.txt; do
  echo "== $(basename $f)" >> $S; grep -E "grid_sampler_2d_backward |ERROR|Error" $f | awk '{print $2, $4, $5, $6, $7, $8, $9, $10}' >> $S
done
tar -czf $OUT/all.tgz -C /tmp gridnear-r
cp $R/profile_new.txt $R/profile3d_new.txt $R/pytest.txt $OUT/ 2>/dev/null
cat $S
