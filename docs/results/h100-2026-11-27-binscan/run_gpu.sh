#!/bin/bash
# binscan's one GPU call (kind nvidia-h100-x1, <= 240 s), run from the staged tree. OLD = the
# scan by digits of before (ADJOINT_TUNE_BINNED_SCAN=1, its kernels byte for byte), NEW = the
# branch's default (the scan on warp lanes, ADJOINT_TUNE_BINNED_SCAN_TOP=8), T1 / T32 / T64 = the lane
# scan with tops of 1, 32 and 64 loads per lane. Every setting in its own process. Bits first (3
# runs bitwise; OLD and NEW hashes must be equal: same offsets, same sorted slots), then bench
# kernel ms A/B, per-kernel profiles (plain launches), the parity suite, the top variants.
# DRY=1: no GPU, every step only echoes its command (the host check of this script).
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1 ADJOINT_CACHE_DIR=/tmp/c-binscan
R=/tmp/binscan-r; rm -rf $R; mkdir -p $R; S=$R/summary.txt
OUT=${OUT:-/tmp/binscan-out}; mkdir -p $OUT
if [ -z "$DRY" ]; then nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S; fi
cat build/STAGED >> $S 2>/dev/null
OLD="ADJOINT_TUNE_BINNED_SCAN=1"
NEW="X=1"
T1="ADJOINT_TUNE_BINNED_SCAN_TOP=1"
T32="ADJOINT_TUNE_BINNED_SCAN_TOP=32"
T64="ADJOINT_TUNE_BINNED_SCAN_TOP=64"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
END=${END:-226}
step() {  # name limit env command...: runs within END s of the start
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt $END ] && limit=$((END - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  if [ -n "$DRY" ]; then echo "timeout $limit env $1 ${*:2}" > $R/$name.txt; rc=0
  else timeout $limit env $1 "${@:2}" > $R/$name.txt 2>&1; rc=$?; fi
  echo "$name rc=$rc ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
BITS=32x3x224x224:224x224,2x16x32x32x32:32x32x32,1x4x17x17x17:17x17x17,4x3x64x64:64x64,16x4x128x128:128x128
step bits_old 24 "$OLD" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest,bicubic --dtypes f32,bf16 --shape-list $BITS
step bits_new 20 "$NEW" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest,bicubic --dtypes f32,bf16 --shape-list $BITS
BIG=32x3x224x224:224x224,8x64x128x128:128x128
step b2_old 14 "$OLD" $B --modes bilinear,nearest --dtypes f32,bf16 --shape-list $BIG --out $R/b2_old.json
step b2_new 14 "$NEW" $B --modes bilinear,nearest --dtypes f32,bf16 --shape-list $BIG --out $R/b2_new.json
step b3_old 8 "$OLD" $B3 --out $R/b3_old.json
step b3_new 8 "$NEW" $B3 --out $R/b3_new.json
CHK=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128
step chk_old 10 "$OLD" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_old.json
step chk_new 10 "$NEW" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_new.json
step b3s_old 7 "$OLD" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_old.json
step b3s_new 7 "$NEW" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_new.json
step prof2d_old 14 "$OLD" $P --modes nearest,bilinear --dtypes f32,bf16 --shape-list 32x3x224x224:224x224
step prof2d_new 14 "$NEW" $P --modes nearest,bilinear --dtypes f32,bf16 --shape-list 32x3x224x224:224x224
step prof3d_old 12 "$OLD" $P --three-d --dtypes f32 --shapes ""
step prof3d_new 12 "$NEW" $P --three-d --dtypes f32 --shapes ""
SMALL=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128,8x64x128x128:128x128
step profs_old 14 "$OLD" $P --modes bilinear,nearest --dtypes f32 --shape-list $SMALL
step profs_new 14 "$NEW" $P --modes bilinear,nearest --dtypes f32 --shape-list $SMALL
XD=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
step pytest 40 "$NEW" python3 -m pytest -q $XD tests/gpu/test_grid_sampler_3d.py tests/gpu/test_grid_sampler.py -k "nearest or bilinear" -p no:cacheprovider
tail -3 $R/pytest.txt >> $S
# The shuffles under compute-sanitizer's synccheck (a lane scan with lanes missing would show).
step synccheck 25 "$NEW" compute-sanitizer --tool synccheck --error-exitcode 9 python3 tests/gpu/grid_sampler_bits.py --modes nearest,bilinear --dtypes f32 --shape-list 4x3x64x64:64x64,1x4x17x17x17:17x17x17
tail -4 $R/synccheck.txt >> $S
# The top of the lane scan: levels until 32 x 1, 32 x 32 or 32 x 64 entries (NEW: 32 x 8). T64
# drops one level of chunk sums at 32x3x224^2 (1569 entries at the top), T32 one at the small
# shapes (4x3x64^2, 2x1x512^2, 16x4x128^2), T1 adds one where the top has 33-256 entries.
step b2_t64 8 "$T64" $B --modes bilinear,nearest --dtypes f32 --shape-list 32x3x224x224:224x224 --out $R/b2_t64.json
step chk_t32 9 "$T32" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_t32.json
step b3s_t32 6 "$T32" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_t32.json
step b2_t1 8 "$T1" $B --modes bilinear,nearest --dtypes f32 --shape-list 32x3x224x224:224x224 --out $R/b2_t1.json
step prof2d_t64 8 "$T64" $P --modes nearest --dtypes f32 --shape-list 32x3x224x224:224x224
step profs_t32 12 "$T32" $P --modes bilinear,nearest --dtypes f32 --shape-list $CHK
for f in bits_old bits_new; do cut -d" " -f1-7 $R/$f.txt | grep -E "deterministic_claim" > $R/$f.cut; done
if cmp -s $R/bits_old.cut $R/bits_new.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: OLD and NEW hashes EQUAL ($(wc -l < $R/bits_new.cut) lines)" >> $S
else echo "bits: hashes DIFFER or missing" >> $S; diff $R/bits_old.cut $R/bits_new.cut | head -20 >> $S; fi
grep -c "bitwise_3_runs=True" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=True lines: /' >> $S
grep -c "bitwise_3_runs=False" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=False lines: /' >> $S
for f in $R/b2_*.txt $R/b3*.txt $R/chk_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^grid_sampler_[23]d_backward |^[a-z]+ +(f32|bf16) |ERROR|rror" $f | cut -c1-150 >> $S; done
# The scan's kernels per profiled program: their count and summed mean us.
for f in $R/prof*.txt; do
  echo "== $(basename $f)" >> $S
  awk '/^== /{if (t != "") printf "%s | scan %d kernels %.1f us\n", t, n, s; t=$0; n=0; s=0}
       /bin_scan/{n++; s+=$1} END{if (t != "") printf "%s | scan %d kernels %.1f us\n", t, n, s}' $f |
    grep -v "allow_atomics\|aten" >> $S
done
tar -czf $OUT/all.tgz -C /tmp binscan-r
cp $S $OUT/summary.txt
cat $S
