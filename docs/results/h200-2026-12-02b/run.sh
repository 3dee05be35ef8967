#!/bin/bash
# The session of 2026-12-02 07:05's first device call: gpu-check's gtest and pytest steps on the
# staged build of d8083ee (the empty grid_sampler parity cases and the drop-in's choice by
# channels had not run on a GPU), the tensor-core experiment bench/experiments/mhc_tensor_cores.cu
# at issue 9's shapes next to adjoint's own per-kernel times (tests/gpu/mhc_kernel_profile.py),
# then gpu-check's compute-sanitizer step. Results under $OUT (check/, experiment/, sanitize/).
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $OUT/progress.txt; }
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader; cat .stage/build/STAGED; python3 -c "import torch; print('torch', torch.__version__)"; nproc; } > $OUT/device.txt 2>&1
E=$OUT/experiment; mkdir -p $E
nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/mtc bench/experiments/mhc_tensor_cores.cu > $E/nvcc.txt 2>&1 &
C=$OUT/check; mkdir -p $C
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=150 GPU_CHECK_PYTEST_WORKERS=12 timeout 160 scripts/gpu-check "$C" gtest,pytest > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
el "gpu-check gtest,pytest"
wait
for s in "1 4096 4 4096" "1 4096 4 2560" "2 2048 6 1024" "1 65536 4 512" "1 64 8 16384"; do
  timeout 60 /tmp/mtc $s >> $E/mhc_tensor_cores.txt 2>&1
done
el "experiment"
ADJOINT_CACHE_DIR=/tmp/adjoint-cache timeout 90 python3 tests/gpu/mhc_kernel_profile.py --all mhc_pre_backward > $E/adjoint_kernels.txt 2>&1
el "adjoint per-kernel"
S=$OUT/sanitize; mkdir -p $S
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=100 timeout 110 scripts/gpu-check "$S" sanitize > $S/gpu-check.out 2>&1
echo "gpu-check sanitize rc=$?" >> $S/gpu-check.out
el "sanitize"
{ cat $OUT/progress.txt $OUT/device.txt; tail -14 $C/gpu-check.out; tail -4 $S/gpu-check.out; cat $E/mhc_tensor_cores.txt; grep -iE "mhc_dx|x_mix|gate|total|shape|B1|B2" $E/adjoint_kernels.txt | head -60; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
