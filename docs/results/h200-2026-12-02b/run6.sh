#!/bin/bash
# Sixth device call: bench/experiments/mhc_tensor_cores.cu as committed (its kernels now share
# their fragment, staging and epilogue helpers), every variant at issue 9's shapes
# (experiment/mhc_tensor_cores6.txt).
E=$OUT/experiment; mkdir -p $E
nvcc -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o /tmp/mtc bench/experiments/mhc_tensor_cores.cu > $E/nvcc6.txt 2>&1 || { cat $E/nvcc6.txt; exit 1; }
for s in "1 4096 4 4096" "1 4096 4 2560" "2 2048 6 1024" "1 65536 4 512" "1 64 8 16384"; do
  timeout 80 /tmp/mtc $s >> $E/mhc_tensor_cores6.txt 2>&1
done
grep -E "^NVIDIA|^dx |^  dx |fused|chunk  512" $E/mhc_tensor_cores6.txt
