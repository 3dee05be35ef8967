#!/bin/bash
# Fifth device call: bench/experiments/mhc_tensor_cores.cu with dx and x_mix fused in one pass
# (experiment/mhc_tensor_cores5.txt), then gpu-check's gtest and pytest steps again on the staged
# build (the drop-in test fixed after check4) in $OUT/check5.
E=$OUT/experiment; mkdir -p $E
nvcc -O3 -arch=sm_90 -std=c++17 -o /tmp/mtc bench/experiments/mhc_tensor_cores.cu > $E/nvcc5.txt 2>&1 || { cat $E/nvcc5.txt; exit 1; }
for s in "1 4096 4 4096" "1 4096 4 2560" "2 2048 6 1024" "1 65536 4 512"; do
  timeout 80 /tmp/mtc $s >> $E/mhc_tensor_cores5.txt 2>&1
done
grep -E "^NVIDIA|^dx |x3\+ahd|fused|smem chunk  512" $E/mhc_tensor_cores5.txt
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
C=$OUT/check5; mkdir -p $C
cat .stage/build/STAGED > $C/staged.txt; git log --oneline -1 >> $C/staged.txt 2>/dev/null
ADJOINT_CACHE_DIR=/tmp/adjoint-cache GPU_CHECK_SECONDS=150 GPU_CHECK_PYTEST_WORKERS=12 timeout 160 scripts/gpu-check "$C" gtest,pytest > $C/gpu-check.out 2>&1
echo "gpu-check rc=$?" >> $C/gpu-check.out
tail -16 $C/gpu-check.out
