#!/bin/bash
# gridbin's first GPU call (kind nvidia-h100-x1, <= 235 s): the binning chain before and after,
# one process per setting. OLD = ADJOINT_TUNE_BINNED_WARP_CLAIMS=0 ADJOINT_TUNE_BINNED_PACKED_KEYS=0
# (main's kernels), NEW = the branch's defaults (warp-aggregated claims, packed keys); CLAIMS =
# claims only, PACKED = packed keys only. Per-kernel profiles (plain launches), bits (hashes of
# OLD and NEW must be equal: the sort gives both the same order), bench A/B.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1 ADJOINT_CACHE_DIR=/tmp/c-gridbin
R=/tmp/gridbin-r; rm -rf $R; mkdir -p $R; S=$R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
cat build/STAGED >> $S 2>/dev/null
OLD="ADJOINT_TUNE_BINNED_WARP_CLAIMS=0 ADJOINT_TUNE_BINNED_PACKED_KEYS=0"
NEW="X=1"
CLAIMS="ADJOINT_TUNE_BINNED_PACKED_KEYS=0"
PACKED="ADJOINT_TUNE_BINNED_WARP_CLAIMS=0"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
END=${END:-228}
step() {  # name limit env command...: runs within END s of the start
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt $END ] && limit=$((END - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env $1 "${@:2}" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
BITS=2x16x32x32x32:32x32x32,32x3x224x224:224x224,1x4x17x17x17:17x17x17
step bits_old 16 "$OLD" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest --dtypes f32 --shape-list $BITS
step bits_new 16 "$NEW" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest --dtypes f32 --shape-list $BITS
step prof3d_old 14 "$OLD" $P --three-d --dtypes f32 --shapes ""
step prof3d_new 14 "$NEW" $P --three-d --dtypes f32 --shapes ""
step prof2d_old 14 "$OLD" $P --modes nearest,bilinear --dtypes f32 --shapes 2
step prof2d_new 14 "$NEW" $P --modes nearest,bilinear --dtypes f32 --shapes 2
step b3_old 12 "$OLD" $B3 --out $R/b3_old.json
step b3_new 12 "$NEW" $B3 --out $R/b3_new.json
step b2_old 30 "$OLD" $B --modes bilinear,nearest --dtypes f32,bf16 --out $R/b2_old.json
step b2_new 30 "$NEW" $B --modes bilinear,nearest --dtypes f32,bf16 --out $R/b2_new.json
step prof3d_claims 10 "$CLAIMS" $P --three-d --dtypes f32 --shapes ""
step prof3d_packed 10 "$PACKED" $P --three-d --dtypes f32 --shapes ""
CHK=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128
step chk_old 14 "$OLD" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_old.json
step chk_new 14 "$NEW" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_new.json
step b3s_old 8 "$OLD" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_old.json
step b3s_new 8 "$NEW" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_new.json
for f in bits_old bits_new; do cut -d" " -f1-7 $R/$f.txt | grep -v "^$" > $R/$f.cut; done
if cmp -s $R/bits_old.cut $R/bits_new.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: OLD and NEW hashes EQUAL ($(wc -l < $R/bits_new.cut) lines)" >> $S
else echo "bits: hashes DIFFER or missing" >> $S; diff $R/bits_old.cut $R/bits_new.cut | head -20 >> $S; fi
grep -c "bitwise_3_runs=True" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=True lines: /' >> $S
for f in $R/b3*.txt $R/b2_*.txt $R/chk_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^grid_sampler_[23]d_backward |ERROR|rror" $f | awk '{print $2, $3, $4, $5, $6}' >> $S; done
for f in $R/prof*.txt; do echo "== $(basename $f)" >> $S; grep -E "^==|bin_|gather|Memset" $f >> $S; done
cp $R/*.txt $R/*.json $OUT/ 2>/dev/null; tar -czf $OUT/all.tgz -C /tmp gridbin-r
cat $S
