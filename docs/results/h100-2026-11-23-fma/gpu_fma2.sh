#!/usr/bin/env bash
# Task fma, call 2: B = FMA + dh_mix_by_k (this branch), A = FMA without it (call 1's library).
# pytest on B; mhc_pre_backward bench and per-kernel times for A and B, default and with 128-thread
# blocks (dx at 136 registers fits 3 blocks of 128 per SM, 1 of 256).
cd "$(dirname "$0")"
export PYTHONPATH=$PWD/python
log=$OUT/console.txt
t0=$(date +%s)
stamp() { echo "== $1 at +$(( $(date +%s) - t0 )) s" >>"$log"; }
use() { export ADJOINT_BUILD_DIR=$PWD/.stage/$1 ADJOINT_LIBRARY=$PWD/.stage/$1/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache-$1; }
nvidia-smi -L >>"$log" 2>&1
use build; stamp "pytest B"
workers=""; python3 -c "import xdist" 2>/dev/null && workers="-n 4"
timeout 50 python3 -m pytest -q $workers tests/gpu/test_mhc.py tests/gpu/test_mhc_layer.py >"$OUT/pytest.txt" 2>&1; echo "pytest rc=$?" >>"$log"
tail -2 "$OUT/pytest.txt" >>"$log"
bench() {  # label lib env...
  local label=$1 lib=$2; shift 2
  use "$lib"; stamp "bench $label ($lib $*)"
  env "$@" timeout 30 python3 bench/bench_mhc.py --filter mhc_pre_backward --no-compile --runs 30 --budget 25 \
     --out "$OUT/bench_$label.json" --chart /tmp/chart_$label.png 2>&1 | grep -E "^mhc_pre|ERROR" >>"$log"
}
bench A buildA X=1
bench B build X=1
bench A128 buildA ADJOINT_TUNE_BLOCK_SIZE=128
bench B128 build ADJOINT_TUNE_BLOCK_SIZE=128
bench B_tile12 build ADJOINT_TUNE_THREAD_TILE=12
for v in "B build X=1" "B128 build ADJOINT_TUNE_BLOCK_SIZE=128" "A128 buildA ADJOINT_TUNE_BLOCK_SIZE=128"; do
  set -- $v; label=$1; use "$2"; shift 2; stamp "profile $label"
  env "$@" timeout 15 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward 2>&1 | grep -E "^==|dx|x_mix|gate|by_k" >>"$log"
done
stamp done
