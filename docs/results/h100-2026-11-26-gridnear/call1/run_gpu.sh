#!/bin/bash
# gridnear's first GPU call (kind nvidia-h100-x1, <= 240 s), main's code (commit 55b8ece): per-kernel
# profiles of nearest f32 at issue 10's three 2-d shapes and of the 3-d case (trilinear and nearest,
# f32/bf16), default vs allow_atomics vs ATen; bench baselines (nearest at the 2-d shapes and the
# few-channel ones, the 3-d bench); then existing knobs as leads (channels-last nearest, no chunk
# sums, no evict-first loads; 3-d: taps in the gather, planar gather, plain launches).
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridnear PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
export PYTHONUNBUFFERED=1
R=/tmp/gridnear-r; rm -rf $R; mkdir -p $R
S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $R/device.txt
cat build/STAGED >> $R/device.txt 2>/dev/null
cat $R/device.txt >> $S
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
SH3=8x64x128x128:128x128,4x32x256x256:256x256,32x3x224x224:224x224
SHX=4x3x64x64:64x64,2x1x512x512:512x512,16x4x128x128:128x128
step() {  # name limit command...: runs it (within 230 s of the start), logs rc and seconds
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt 230 ] && limit=$((230 - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
step profile_nearest 40 X=1 $P --modes nearest --dtypes f32 --shapes 0,1,2
step profile_3d 30 X=1 $P --three-d --dtypes f32,bf16 --shapes ""
step bench_nearest 35 X=1 $B --modes nearest --dtypes f32,bf16 --shape-list $SH3,$SHX --out $R/bench_nearest.json
step bench3d 20 X=1 $B3 --out $R/bench3d.json
step exp_rpc1 25 ADJOINT_TUNE_BINNED_RECORDS_PER_CELL=1 $B --modes nearest --dtypes f32,bf16 --shape-list $SH3,$SHX --out $R/exp_rpc1.json
step profile_rpc1 15 ADJOINT_TUNE_BINNED_RECORDS_PER_CELL=1 $P --modes nearest --dtypes f32 --shapes 0,2
step exp_chunk0 12 ADJOINT_TUNE_BINNED_GATHER_CHUNK=0 $B --modes nearest --dtypes f32 --shape-list $SH3 --out $R/exp_chunk0.json
step exp3d_taps 15 ADJOINT_TUNE_BINNED_TAPS=128 $B3 --out $R/exp3d_taps.json
step exp3d_stream2 12 ADJOINT_TUNE_STREAMING=2 $B3 --out $R/exp3d_stream2.json
step exp_stream2 12 ADJOINT_TUNE_STREAMING=2 $B --modes nearest --dtypes f32,bf16 --shape-list $SH3 --out $R/exp_stream2.json
step exp3d_cl0 10 ADJOINT_TUNE_BINNED_CHANNELS_LAST=0 $B3 --out $R/exp3d_cl0.json
for f in $R/bench3d.txt $R/exp3d_*.txt; do echo "== $(basename $f)" >> $S; grep -iE "^grid_sampler_3d|bilinear|nearest|error" $f | grep -v "%" >> $S; done
for f in $R/bench_*.txt $R/exp_*.txt; do
  echo "== $(basename $f)" >> $S; grep -E "grid_sampler_2d_backward |ERROR|Error" $f | awk '{print $2, $4, $5, $6, $7, $8, $9, $10}' >> $S
done
tar -czf $OUT/all.tgz -C /tmp gridnear-r
cp $R/profile_nearest.txt $R/profile_3d.txt $R/profile_rpc1.txt $OUT/ 2>/dev/null
cat $S
