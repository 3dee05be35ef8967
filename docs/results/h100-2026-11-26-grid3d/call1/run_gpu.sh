#!/bin/bash
# grid3d's first GPU call (kind nvidia-h100-x1, <= 200 s) on main's build (8555446, no change
# yet): existing knobs on 3-d grid_sampler backward (bench_grid_sampler_3d.py, one process per
# setting), per-kernel profiles of the candidates, and the 2-d bilinear shapes under the
# unroll knob (does a rule from it hold at 2-d?). Measures first, to choose the rules.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1
R=$OUT; S=$OUT/summary.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> $S
cat build/STAGED >> $S 2>/dev/null
B3="python3 bench/bench_grid_sampler_3d.py --runs 30 --warmup 5"
B="python3 bench/bench_grid_sampler.py --paddings zeros --runs 30 --warmup 5"
P="python3 tests/gpu/grid_sampler_kernel_profile.py"
step() {  # name limit env... command: runs it within 190 s of the start, own compile cache
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  [ $((t0 + limit)) -gt 190 ] && limit=$((190 - t0))
  if [ $limit -lt 4 ]; then echo "$name not run (no time left)" >> $S; return; fi
  timeout $limit env ADJOINT_CACHE_DIR=/tmp/c-grid3d "$@" > $R/$name.txt 2>&1
  echo "$name rc=$? ${limit}s-limit took $((SECONDS - t0))s" >> $S
}
L16="ADJOINT_TUNE_GATHERED_LANES=16"
step b3_base 14 X=1 $B3 --out $R/b3_base.json
step b3_unroll4 10 ADJOINT_TUNE_PARTIAL_UNROLL=4 $B3 --out $R/b3_unroll4.json
step b3_unroll2 10 ADJOINT_TUNE_PARTIAL_UNROLL=2 $B3 --out $R/b3_unroll2.json
step b3_unroll16 10 ADJOINT_TUNE_PARTIAL_UNROLL=16 $B3 --out $R/b3_unroll16.json
step b3_rows0 10 ADJOINT_TUNE_GATHERED_ROWS=0 $B3 --out $R/b3_rows0.json
step b3_rows0_unroll4 10 ADJOINT_TUNE_GATHERED_ROWS=0 ADJOINT_TUNE_PARTIAL_UNROLL=4 $B3 --out $R/b3_rows0_unroll4.json
step b3_l16w16 10 $L16 ADJOINT_TUNE_GATHERED_LANE_WIDTH=16 $B3 --out $R/b3_l16w16.json
step b3_l16w8 10 $L16 ADJOINT_TUNE_GATHERED_LANE_WIDTH=8 $B3 --out $R/b3_l16w8.json
step b3_l16w4 10 $L16 ADJOINT_TUNE_GATHERED_LANE_WIDTH=4 $B3 --out $R/b3_l16w4.json
step b3_chunk0 10 ADJOINT_TUNE_BINNED_GATHER_CHUNK=0 $B3 --out $R/b3_chunk0.json
step b3_scan0 10 ADJOINT_TUNE_BINNED_SCAN=0 $B3 --out $R/b3_scan0.json
step prof3d_base 20 X=1 $P --three-d --dtypes f32,bf16 --shapes ""
step prof3d_unroll4 14 ADJOINT_TUNE_PARTIAL_UNROLL=4 $P --three-d --dtypes f32 --shapes ""
step prof3d_l16w8 14 $L16 ADJOINT_TUNE_GATHERED_LANE_WIDTH=8 $P --three-d --dtypes f32 --shapes ""
step b2_base 20 X=1 $B --modes bilinear --dtypes f32,bf16 --shape-list 8x64x128x128:128x128,4x32x256x256:256x256,32x3x224x224:224x224 --out $R/b2_base.json
step b2_unroll4 20 ADJOINT_TUNE_PARTIAL_UNROLL=4 $B --modes bilinear --dtypes f32,bf16 --shape-list 8x64x128x128:128x128,4x32x256x256:256x256,32x3x224x224:224x224 --out $R/b2_unroll4.json
for f in $R/b3_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^grid_sampler_3d_backward (bilinear|nearest)|ERROR|rror" $f | grep -v "%" | awk '{print $2, $4, $5, $6, $7}' >> $S; done
for f in $R/b2_*.txt; do echo "== $(basename $f)" >> $S; grep -E "grid_sampler_2d_backward |ERROR|rror" $f | awk '{print $2, $3, $4, $5, $6, $7}' >> $S; done
for f in $R/prof3d_*.txt; do echo "== $(basename $f)" >> $S; grep -E "^==|grad_grid|input_lanes|input_rows" $f >> $S; done
cat $S
