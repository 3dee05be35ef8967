#!/bin/bash
# The sinkcold device call: cold first calls and kernel times old (main) vs new, parity, phases.
cd "$(dirname "$0")"
S=$PWD
export PYTHONPATH=$S/python
nvidia-smi -L > $OUT/device.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >> $OUT/device.txt 2>&1
timeout 150 python3 bench/sinkhorn_cold.py --out $OUT/cold.json \
  --build old=$S/old/lib/libadjoint.so,$S/old/lib/_fastlaunch.abi3.so \
  --build new=$S/build/lib/libadjoint.so,$S/build/lib/_fastlaunch.abi3.so --n 4 8 > $OUT/cold.txt 2>&1
echo "cold rc=$?" >> $OUT/cold.txt
ADJOINT_LIBRARY=$S/build/lib/libadjoint.so ADJOINT_BUILD_DIR=$S/build ADJOINT_CACHE_DIR=/tmp/parity-cache \
  ADJOINT_FASTLAUNCH=1 timeout 45 python3 -m pytest -q tests/gpu/test_mhc_layer.py -k sinkhorn > $OUT/parity.txt 2>&1
echo "parity rc=$?" >> $OUT/parity.txt
for b in build old; do
  for op in mhc_sinkhorn mhc_sinkhorn_backward; do
    for n in 4 8; do
      timeout 20 $S/$b/bin/adjoint compile "$op dtype=f32 batch=1 seq=4096 n=$n" 2>&1 | grep -E "^kernel|registers|phases" | sed "s/^/$b $op n=$n: /" >> $OUT/compile_phases.txt
    done
  done
done
