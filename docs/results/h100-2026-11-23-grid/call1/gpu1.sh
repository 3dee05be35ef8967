#!/usr/bin/env bash
# Call 1 of helper "grid": parity + determinism, per-kernel profile, 3-d bench A/B.
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/device.txt 2>&1
t0=$(date +%s)
timeout 60 python3 -m pytest -q -n 8 tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py > $OUT/pytest.txt 2>&1
echo "pytest rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
timeout 45 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bilinear,bicubic --dtypes f32 --shapes 0,1 > $OUT/profile_after.txt 2>&1
echo "profile rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
for rpc in 2 1; do
  echo "== nearest ADJOINT_TUNE_BINNED_RECORDS_PER_CELL=$rpc" >> $OUT/profile_nearest.txt
  ADJOINT_TUNE_BINNED_RECORDS_PER_CELL=$rpc timeout 15 python3 tests/gpu/grid_sampler_kernel_profile.py --modes nearest --dtypes f32 --shapes 0,1 >> $OUT/profile_nearest.txt 2>&1
  echo "nearest rpc=$rpc rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
done
for cfg in "before ADJOINT_TUNE_TILED_TRANSPOSE=0 ADJOINT_TUNE_GATHERED_LANES=0" "after" "lanes16 ADJOINT_TUNE_GATHERED_LANES=16"; do
  set -- $cfg; name=$1; shift
  echo "== 3d $name: $*" >> $OUT/bench3d.txt
  env "$@" timeout 15 python3 bench/bench_grid_sampler_3d.py --runs 30 --out /tmp/b3.json >> $OUT/bench3d.txt 2>&1
  echo "bench3d $name rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
done
cat $OUT/times.txt
