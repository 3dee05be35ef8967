#!/usr/bin/env bash
# One device call (branch mhcsmall): parity (tests/gpu/test_mhc.py), then per-kernel times of
# main's build ("main"), this branch ("new") and this branch with its four knobs at 0 ("knobs",
# whose kernels are main's, byte for byte in the dumps), tests/gpu/mhc_backward_sweep.py; then
# new against ADJOINT_TUNE_MHC_DVECX=0 alone at the direct-path shapes (the same bits expected).
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv; cat build/STAGED; date -u; } > "$OUT/device.txt" 2>&1
timeout 70 python3 -m pytest -q tests/gpu/test_mhc.py > "$OUT/test_mhc.txt" 2>&1; echo "pytest rc=$?" >> "$OUT/test_mhc.txt"
date -u >> "$OUT/device.txt"
SH=1x181x8x4096,1x126x8x1000,1x1x8x16384,1x4096x4x4096,2x2048x6x1024,2x6x8x5120,3x33x8x512,1x8x6x4096
K=ADJOINT_TUNE_WARP_GROUP_FILL=0,ADJOINT_TUNE_MHC_X_MIX=0,ADJOINT_TUNE_SPLIT_WARP_COMBINE_STAGES=0,ADJOINT_TUNE_MHC_DVECX=0
timeout 120 python3 tests/gpu/mhc_backward_sweep.py --runs 20 --budget 112 --shapes $SH \
  main:ADJOINT_LIBRARY=$PWD/build-main/lib/libadjoint.so new: knobs:$K > "$OUT/sweep.txt" 2>&1
echo "sweep rc=$?" >> "$OUT/sweep.txt"
date -u >> "$OUT/device.txt"
timeout 40 python3 tests/gpu/mhc_backward_sweep.py --runs 20 --budget 36 --shapes 1x1x8x16384,1x2x8x4096 \
  new: nodvecx:ADJOINT_TUNE_MHC_DVECX=0 > "$OUT/sweep_dvecx.txt" 2>&1
echo "sweep rc=$?" >> "$OUT/sweep_dvecx.txt"
date -u >> "$OUT/device.txt"
