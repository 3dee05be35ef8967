#!/bin/bash
# grid3d's second GPU call (kind nvidia-h100-x1, <= 200 s) on the branch's build: main's kernels
# (ADJOINT_TUNE_GATHERED_LANES=32 ADJOINT_TUNE_GATHERED_WHOLE_AXIS=0) against the new defaults
# (lanes from 16 channels on, 4 lanes per point below 32, a lane group per point's coordinates),
# one process each: bench_grid_sampler_3d.py, variants on top of the defaults, the 2-d shapes at
# 16 channels that the rule reaches (bench_grid_sampler.py); the 3-d GPU parity + determinism
# suite and the 2-d one's 16-channel cases; bits (3 runs, hashes with the whole-axis groups on
# and off); per-kernel profiles of the new 3-d programs.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1
R=/tmp/grid3d-r; rm -rf $R; mkdir -p $R; S=$R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
cat build/STAGED >> $S 2>/dev/null
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
OLD="ADJOINT_TUNE_GATHERED_LANES=32 ADJOINT_TUNE_GATHERED_WHOLE_AXIS=0"
step() {  # name limit env... command: runs it within 192 s of the start
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt 192 ] && limit=$((192 - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env ADJOINT_CACHE_DIR=/tmp/c-grid3d "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
step b3_old 14 $OLD $B3 --out $R/b3_old.json
step b3_new 10 X=1 $B3 --out $R/b3_new.json
step b3_point 9 ADJOINT_TUNE_GATHERED_WHOLE_AXIS=0 $B3 --out $R/b3_point.json
step b3_w8 9 ADJOINT_TUNE_GATHERED_LANE_WIDTH=8 $B3 --out $R/b3_w8.json
step b3_w16 9 ADJOINT_TUNE_GATHERED_LANE_WIDTH=16 $B3 --out $R/b3_w16.json
step b3_unroll4 9 ADJOINT_TUNE_PARTIAL_UNROLL=4 $B3 --out $R/b3_unroll4.json
SH16=4x16x128x128:128x128,2x16x256x256:256x256
step b2_16_old 14 $OLD $B --modes bilinear,bicubic --dtypes f32,bf16 --shape-list $SH16 --out $R/b2_16_old.json
step b2_16_new 12 X=1 $B --modes bilinear,bicubic --dtypes f32,bf16 --shape-list $SH16 --out $R/b2_16_new.json
XD=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
step pytest 60 X=1 python3 -m pytest -q $XD tests/gpu/test_grid_sampler_3d.py -p no:cacheprovider
tail -1 $R/pytest.txt >> $S
step pytest2d 25 X=1 python3 -m pytest -q $XD tests/gpu/test_grid_sampler.py -k "16 and (bilinear or bicubic)" -p no:cacheprovider
tail -1 $R/pytest2d.txt >> $S
BITS=2x16x32x32x32:32x32x32,4x16x128x128:128x128
for cfg in new point; do
  if [ $cfg = point ]; then K="ADJOINT_TUNE_GATHERED_WHOLE_AXIS=0"; else K="X=1"; fi
  step bits_$cfg 12 $K python3 tests/gpu/grid_sampler_bits.py --modes bilinear,bicubic --shape-list $BITS
done
cut -d' ' -f1-6 $R/bits_new.txt > $R/bits_new.cut; cut -d' ' -f1-6 $R/bits_point.txt > $R/bits_point.cut
if cmp -s $R/bits_new.cut $R/bits_point.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: whole-axis on and off hashes EQUAL ($(wc -l < $R/bits_new.cut) cases)" >> $S
else echo "bits: hashes DIFFER or missing" >> $S; diff $R/bits_new.cut $R/bits_point.cut >> $S; fi
grep -c "bitwise_3_runs=True" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=True lines: /' >> $S
step prof3d_new 14 X=1 $P --three-d --dtypes f32,bf16 --shapes ""
for f in $R/b3_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^grid_sampler_3d_backward (bilinear|nearest)|ERROR|rror" $f | grep -v "%" | awk '{print $2, $4, $5, $6, $7}' >> $S; done
for f in $R/b2_*.txt; do echo "== $(basename $f)" >> $S; grep -E "grid_sampler_2d_backward |ERROR|rror" $f | awk '{print $2, $4, $5, $6, $7}' >> $S; done
echo "== prof3d_new" >> $S; grep -E "^==|grad_grid|input_lanes" $R/prof3d_new.txt >> $S
cp $S $OUT/; tar -czf $OUT/all.tgz -C /tmp grid3d-r
cat $S
