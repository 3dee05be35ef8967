#!/bin/bash
# Second device call: bench/experiments/mhc_tensor_cores.cu with the look-ahead variants (+ahd).
E=$OUT/experiment; mkdir -p $E
nvidia-smi -L > $E/device2.txt
nvcc -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o /tmp/mtc bench/experiments/mhc_tensor_cores.cu > $E/nvcc2.txt 2>&1 || { cat $E/nvcc2.txt; exit 1; }
for s in "1 4096 4 4096" "1 4096 4 2560" "2 2048 6 1024" "1 65536 4 512" "1 64 8 16384"; do
  timeout 80 /tmp/mtc $s >> $E/mhc_tensor_cores2.txt 2>&1
done
cat $E/mhc_tensor_cores2.txt
