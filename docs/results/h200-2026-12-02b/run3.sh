#!/bin/bash
# Third device call: the same with the shared-memory staged x_mix partials (+smem).
E=$OUT/experiment; mkdir -p $E
nvidia-smi -L > $E/device3.txt
nvcc -O3 -arch=sm_90 -std=c++17 -Xptxas -v -o /tmp/mtc bench/experiments/mhc_tensor_cores.cu > $E/nvcc3.txt 2>&1 || { cat $E/nvcc3.txt; exit 1; }
for s in "1 4096 4 4096" "1 4096 4 2560" "2 2048 6 1024" "1 65536 4 512" "1 64 8 16384"; do
  timeout 80 /tmp/mtc $s >> $E/mhc_tensor_cores3.txt 2>&1
done
grep -E "^NVIDIA|^dx |x3\+ahd|xmix" $E/mhc_tensor_cores3.txt
