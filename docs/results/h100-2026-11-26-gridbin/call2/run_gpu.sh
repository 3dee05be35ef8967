#!/bin/bash
# gridbin's second GPU call (kind nvidia-h100-x1, <= 235 s). OLD = main's binning
# (ADJOINT_TUNE_BINNED_PACKED_KEYS=0 ADJOINT_TUNE_BINNED_RANKED_COUNT=0), PK = packed keys only
# (the first commit's default: ADJOINT_TUNE_BINNED_RANKED_COUNT=0), NEW = the branch's defaults
# (packed keys + ranked count). Bits first (3 runs bitwise; OLD and NEW hashes must be equal:
# the sort gives both the same order), then bench A/B, per-kernel profiles, the parity suite.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1 ADJOINT_CACHE_DIR=/tmp/c-gridbin
R=/tmp/gridbin-r; rm -rf $R; mkdir -p $R; S=$R/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
cat build/STAGED >> $S 2>/dev/null
OLD="ADJOINT_TUNE_BINNED_PACKED_KEYS=0 ADJOINT_TUNE_BINNED_RANKED_COUNT=0"
PK="ADJOINT_TUNE_BINNED_RANKED_COUNT=0"
NEW="X=1"
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
BITS=2x16x32x32x32:32x32x32,1x4x17x17x17:17x17x17,32x3x224x224:224x224,16x4x128x128:128x128
step bits_old 24 "$OLD" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest,bicubic --dtypes f32,bf16 --shape-list $BITS
step bits_new 24 "$NEW" python3 tests/gpu/grid_sampler_bits.py --modes bilinear,nearest,bicubic --dtypes f32,bf16 --shape-list $BITS
step b2_old 16 "$OLD" $B --modes bilinear,nearest --dtypes f32,bf16 --out $R/b2_old.json
step b2_pk 12 "$PK" $B --modes bilinear,nearest --dtypes f32,bf16 --out $R/b2_pk.json
step b2_new 14 "$NEW" $B --modes bilinear,nearest --dtypes f32,bf16 --out $R/b2_new.json
step b3_old 8 "$OLD" $B3 --out $R/b3_old.json
step b3_pk 8 "$PK" $B3 --out $R/b3_pk.json
step b3_new 8 "$NEW" $B3 --out $R/b3_new.json
CHK=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128
step chk_old 10 "$OLD" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_old.json
step chk_new 10 "$NEW" $B --modes bilinear,nearest --dtypes f32 --shape-list $CHK --out $R/chk_new.json
step b3s_old 7 "$OLD" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_old.json
step b3s_new 7 "$NEW" $B3 --sizes 1x4x17x17x17:17x17x17 --out $R/b3s_new.json
step prof2d_new 12 "$NEW" $P --modes nearest,bilinear --dtypes f32 --shapes 2
step prof3d_new 13 "$NEW" $P --three-d --dtypes f32 --shapes ""
XD=$(python3 -c 'import xdist' 2>/dev/null && echo "-n 8")
step pytest 80 "$NEW" python3 -m pytest -q $XD tests/gpu/test_grid_sampler_3d.py tests/gpu/test_grid_sampler.py -k "nearest or bilinear" -p no:cacheprovider
tail -3 $R/pytest.txt >> $S
for f in bits_old bits_new; do cut -d" " -f1-7 $R/$f.txt | grep -E "deterministic_claim" > $R/$f.cut; done
if cmp -s $R/bits_old.cut $R/bits_new.cut && [ -s $R/bits_new.cut ]; then
  echo "bits: OLD and NEW hashes EQUAL ($(wc -l < $R/bits_new.cut) lines)" >> $S
else echo "bits: hashes DIFFER or missing" >> $S; diff $R/bits_old.cut $R/bits_new.cut | head -20 >> $S; fi
grep -c "bitwise_3_runs=True" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=True lines: /' >> $S
grep -c "bitwise_3_runs=False" $R/bits_new.txt | sed 's/^/bits_new bitwise_3_runs=False lines: /' >> $S
for f in $R/b3*.txt $R/b2_*.txt $R/chk_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^grid_sampler_[23]d_backward |ERROR|rror" $f | awk '{print $2, $3, $4, $5, $6}' >> $S; done
for f in $R/prof*.txt; do echo "== $(basename $f)" >> $S; grep -E "^==|bin_|gather|Memset" $f >> $S; done
tar -czf $OUT/all.tgz -C /tmp gridbin-r
cat $S
