#!/usr/bin/env bash
# The one device call of branch dxcold (docs/results/h100-2026-11-26-dxcold/README.md): run from
# the staged tree (build/ with libadjoint.so, bin/adjoint, bin/adjoint_jit_bench); writes under
# $OUT. Parts in order of importance, each bounded by `timeout`.
set -u
root=$(pwd)
export ADJOINT_BUILD_DIR=$root/build ADJOINT_LIBRARY=$root/build/lib/libadjoint.so PYTHONPATH=$root/python
export ADJOINT_CACHE_DIR=/tmp/dxcold-cache
nvidia-smi --query-gpu=name --format=csv,noheader > "$OUT/device.txt" 2>&1
# 1. Kernel times and output digests: old (the misaligned copy tiled, main's kernels), new
#    (default), the aligned k loop of dx unrolled 2 and 1 times; old and new again (noise).
old=ADJOINT_TUNE_TILE_FALLBACK=0
timeout 100 python3 tests/gpu/mhc_backward_sweep.py --runs 10 --budget 92 \
  old:$old new: u2:ADJOINT_TUNE_TILE_UNROLL=2 u1:ADJOINT_TUNE_TILE_UNROLL=1 old2:$old new2: \
  > "$OUT/sweep.txt" 2>&1
# 2. Cold prepare of mhc_pre_backward (B1 S4096 n4 D2560, bench/jit_bench.cpp), fresh processes,
#    empty ADJOINT_CACHE_DIR and CUDA_CACHE_PATH, 3 runs per setting, settings alternated.
ADJOINT_BENCH_COLD_SETTINGS="old=$old;new=;u1=ADJOINT_TUNE_TILE_UNROLL=1;old2=$old;new2=;u12=ADJOINT_TUNE_TILE_UNROLL=1" \
  timeout 55 build/bin/adjoint_jit_bench --cold-prepare-only mhc_pre_backward > "$OUT/cold.json" 2> "$OUT/cold.err"
# 3. Misaligned inputs (every input one element into its buffer): the misaligned copies run;
#    their digests must equal the aligned runs'.
timeout 35 python3 tests/gpu/mhc_backward_sweep.py --runs 5 --budget 30 --misaligned \
  --shapes 1x4096x4x4096,1x4096x4x2560 old:$old new: > "$OUT/misaligned.txt" 2>&1
# 4. NVRTC time of dx and x_mix's partials alone on this host (bench/nvrtc_phases.py, median of
#    3), old / new / u1 at B1 S4096 n4 D4096, and each program's compile per kernel as
#    `adjoint compile` reports it (13 kernels at once on this host's threads).
mkdir -p /tmp/dxcold-src
for v in "old $old" "new X=1" "u1 ADJOINT_TUNE_TILE_UNROLL=1"; do
  set -- $v
  env "$2" build/bin/adjoint cuda "mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096" > /tmp/dxcold-src/$1.cu
  python3 - /tmp/dxcold-src/$1.cu "$1" <<'PY'
import re, sys
for part in re.split(r"(?m)^// ===== kernel ", open(sys.argv[1]).read())[1:]:
    name = part.split(":")[0].replace("mhc_pre_backward_mhc_", "")
    if name in ("dx", "x_mix_x_mix_partials"):
        open("/tmp/dxcold-src/%s_%s.cu" % (sys.argv[2], name), "w").write("// ===== kernel " + part)
PY
done
timeout 25 python3 bench/nvrtc_phases.py /tmp/dxcold-src/old_dx.cu /tmp/dxcold-src/new_dx.cu \
  /tmp/dxcold-src/u1_dx.cu /tmp/dxcold-src/old_x_mix_x_mix_partials.cu \
  /tmp/dxcold-src/new_x_mix_x_mix_partials.cu > "$OUT/nvrtc_phases.txt" 2>&1
for v in "old $old" "new X=1" "u1 ADJOINT_TUNE_TILE_UNROLL=1"; do
  set -- $v
  echo "== $1 $2"
  env "$2" timeout 8 build/bin/adjoint compile "mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096" 2>&1
done > "$OUT/adjoint_compile.txt"
echo done > "$OUT/done.txt"
