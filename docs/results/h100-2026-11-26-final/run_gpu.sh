#!/bin/bash
# Final GPU call of the 2026-11-26 session on merged main: programmatic-launch A/B (grid_sampler
# bilinear at issue 10's shapes; mhc_pre_backward at issue 9's), then scripts/gpu-check.
export ADJOINT_FASTLAUNCH=1 PYTHONPATH=$PWD/python ADJOINT_BUILD_DIR=$PWD/.stage/build
export ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so
R=$OUT/r; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat .stage/build/STAGED; } > $R/device.txt
for p in 1 2; do
  ADJOINT_CACHE_DIR=/tmp/cg$p ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=$p timeout 32 python3 bench/bench_grid_sampler.py \
    --modes bilinear --shapes 0,1,2 --paddings zeros --dtypes f32,bf16 --runs 30 \
    --out $R/grid_pdl$p.json > $R/grid_pdl$p.txt 2>&1
  echo "grid pdl$p rc=$?" >> $R/summary.txt
done
ADJOINT_CACHE_DIR=/tmp/cm timeout 80 python3 tests/gpu/mhc_backward_sweep.py --runs 10 --budget 70 \
  plain:ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 short:ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=1 \
  every:ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=2 > $R/mhc_pdl.txt 2>&1
echo "mhc rc=$?" >> $R/summary.txt
left=$((405 - SECONDS)); echo "gpu-check budget $left s" >> $R/summary.txt
GPU_CHECK_SECONDS=$left GPU_CHECK_PYTEST_WORKERS=8 ADJOINT_CACHE_DIR=/tmp/cc scripts/gpu-check $R/check gtest,pytest,sanitize > $R/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $R/summary.txt
tar czf $OUT/final.tgz -C $OUT r
cat $R/summary.txt; tail -25 $R/check/summary.txt
