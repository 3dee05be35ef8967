#!/bin/bash
# Device call 2 of branch mhcgen (run from the staged tree's root; results under $OUT): generic
# mhc_pre_backward with the new generic schedules against the specialized kernels and against
# the generic kernels of before (every ADJOINT_TUNE_GENERIC_* knob at 0: main's kernels), plus
# one new default at a time switched off, in one call; GPU parity; per-kernel times.
set -u
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
       PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 ADJOINT_CACHE_DIR=/tmp/mhcgen-cache
BEFORE="ADJOINT_TUNE_GENERIC_TWIN=0 ADJOINT_TUNE_GENERIC_LANE_GROUPS=0 ADJOINT_TUNE_GENERIC_SPANS=0 ADJOINT_TUNE_GENERIC_MIN_GROUPS=0 ADJOINT_TUNE_GENERIC_WHOLE_TILES=0 ADJOINT_TUNE_GENERIC_STREAMING=0"
VARIANTS="before:${BEFORE// /,};interleave0:ADJOINT_TUNE_GENERIC_INTERLEAVE=0;streaming0:ADJOINT_TUNE_GENERIC_STREAMING=0;wholetiles0:ADJOINT_TUNE_GENERIC_WHOLE_TILES=0"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/device.txt 2>&1
cp STAGED_COMMIT $OUT/ 2>/dev/null
start=$SECONDS
step() { echo "$1 rc=$2 at $((SECONDS - start)) s" >> $OUT/steps.log; }
# Kernel time: specialized (never), generic now (always), and the variants (always).
timeout 120 python3 bench/bench_mhc_dynamic.py --parts time --runs 30 --timeout 40 \
  --variants "$VARIANTS" --out $OUT/mhc_dynamic.json > $OUT/mhc_dynamic.txt 2>&1
step bench $?
# GPU parity of generic kernels at sizes they were not compiled for, determinism (whole file).
timeout 45 python3 -m pytest -q tests/gpu/test_dynamic_shapes.py > $OUT/pytest_dynamic_shapes.txt 2>&1
step pytest $?
# Per-kernel times (torch.profiler): generic now, before, interleave 0 at 5 shapes; specialized.
timeout 17 python3 tests/gpu/mhc_kernel_profile.py --generic --all mhc_pre_backward > $OUT/profile_generic.txt 2>&1
step profile_generic $?
env $BEFORE timeout 17 python3 tests/gpu/mhc_kernel_profile.py --generic --all mhc_pre_backward > $OUT/profile_generic_before.txt 2>&1
step profile_generic_before $?
ADJOINT_TUNE_GENERIC_INTERLEAVE=0 timeout 14 python3 tests/gpu/mhc_kernel_profile.py --generic mhc_pre_backward > $OUT/profile_generic_interleave0.txt 2>&1
step profile_generic_interleave0 $?
timeout 16 python3 tests/gpu/mhc_kernel_profile.py --all mhc_pre_backward > $OUT/profile_specialized.txt 2>&1
step profile_specialized $?
