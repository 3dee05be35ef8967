#!/usr/bin/env bash
# GPU steps of task fma: parity/determinism, bench before (ADJOINT_TUNE_FMA=0) and after, per-kernel
# times, ncu of dx and x_mix at B1 S4096 n4 D4096. Every step bounded.
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python
export ADJOINT_CACHE_DIR=/tmp/adjoint-cache-fma
log=$OUT/console.txt
t0=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - t0 )) s" >>"$log"; }
nvidia-smi -L >>"$log" 2>&1
stamp pytest
workers=""; python3 -c "import xdist" 2>/dev/null && workers="-n 4"
timeout 60 python3 -m pytest -q $workers tests/gpu/test_mhc.py tests/gpu/test_mhc_layer.py >"$OUT/pytest.txt" 2>&1; echo "pytest rc=$?" >>"$log"
tail -3 "$OUT/pytest.txt" >>"$log"
for fma in 0 1; do
  stamp "bench FMA=$fma"
  ADJOINT_TUNE_FMA=$fma timeout 45 python3 bench/bench_mhc.py --filter mhc_pre_backward --no-compile --runs 50 \
     --budget 35 --out "$OUT/bench_fma$fma.json" --chart /tmp/chart$fma.png >>"$log" 2>&1; echo "bench rc=$?" >>"$log"
done
for fma in 0 1; do
  stamp "profile FMA=$fma"
  ADJOINT_TUNE_FMA=$fma timeout 20 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward >>"$log" 2>&1
done
stamp ncu
timeout 35 ncu --kernel-name regex:'mhc_dx$|x_mix_partials' --launch-count 2 --section SpeedOfLight \
   --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy \
   python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward >"$OUT/ncu.txt" 2>&1; echo "ncu rc=$?" >>"$log"
stamp done
