#!/usr/bin/env bash
# Call 2 of helper "grid": before/after benches in one run (before = the knobs of this branch
# off, which is main's code path), the one-cell worst case.
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/device.txt 2>&1
t0=$(date +%s)
OFF="ADJOINT_TUNE_TILED_TRANSPOSE=0 ADJOINT_TUNE_GATHERED_LANES=0"
env $OFF timeout 52 python3 bench/bench_grid_sampler.py --paddings zeros --runs 15 --out $OUT/bench_before.json > $OUT/bench_before.txt 2>&1
echo "bench before rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
timeout 52 python3 bench/bench_grid_sampler.py --paddings zeros --runs 15 --out $OUT/bench_after.json > $OUT/bench_after.txt 2>&1
echo "bench after rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
{ echo "== 3d before: $OFF"; env $OFF timeout 14 python3 bench/bench_grid_sampler_3d.py --runs 30 --out /tmp/b3.json
  echo "== 3d after"; timeout 14 python3 bench/bench_grid_sampler_3d.py --runs 30 --out /tmp/b3.json; } > $OUT/bench3d.txt 2>&1
echo "bench3d rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt; t0=$(date +%s)
timeout 20 python3 tests/gpu/grid_sampler_kernel_profile.py --one-cell --shapes "" > $OUT/profile_one_cell.txt 2>&1
echo "one-cell rc=$? $(( $(date +%s) - t0 ))s" >> $OUT/times.txt
cat $OUT/times.txt
