#!/bin/bash
# gridbf GPU call 2: main's kernels (ADJOINT_TUNE_BINNED_SCAN=0 ADJOINT_TUNE_PDL=0) against the
# scan by digits alone (1 0) and the new defaults (1 1: scan by digits + programmatic dependent
# launch), bilinear zeros at issue 10's three shapes; per-kernel profile of the defaults; the
# GPU gtests that launch; the whole GPU pytest suite with the defaults; then nearest/bicubic.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so
export ADJOINT_CACHE_DIR=/tmp/c-gridbf2 PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
cat build/STAGED >> $OUT/device.txt
for cfg in "0 0" "1 0" "1 1"; do
  set -- $cfg
  ADJOINT_TUNE_BINNED_SCAN=$1 ADJOINT_TUNE_PDL=$2 timeout 25 python3 bench/bench_grid_sampler.py \
    --modes bilinear --shapes 0,1,2 --paddings zeros --dtypes f32,bf16 --runs 30 \
    --out $R/bench_scan$1_pdl$2.json > $R/bench_scan$1_pdl$2.txt 2>&1
  echo "bench scan$1 pdl$2 rc=$?" >> $OUT/summary.txt
done
timeout 14 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bilinear --dtypes bf16,f32 \
  --shapes 1,2 > $R/profile_defaults.txt 2>&1
echo "profile rc=$?" >> $OUT/summary.txt
for t in gpu_api_test runtime_driver_test jit_compile_test; do
  timeout 20 build/bin/$t > $R/gtest_$t.txt 2>&1; echo "gtest $t rc=$? $(tail -1 $R/gtest_$t.txt)" >> $OUT/summary.txt
done
left=$((168 - SECONDS)); [ $left -lt 20 ] && left=20
timeout $left python3 -m pytest -q tests/gpu -p no:cacheprovider > $R/pytest.txt 2>&1
echo "pytest rc=$? (limit $left s): $(tail -1 $R/pytest.txt)" >> $OUT/summary.txt
grep -E "FAILED|Error" $R/pytest.txt | head -20 >> $OUT/summary.txt
for f in $R/bench_*.txt; do echo "== $f" >> $OUT/summary.txt; grep -E "bilinear zeros" $f | awk '{print $4, $5, $6, $7, $8, $9, $10}' >> $OUT/summary.txt; done
tar -czf $OUT/all.tgz -C $OUT r
cat $OUT/summary.txt
