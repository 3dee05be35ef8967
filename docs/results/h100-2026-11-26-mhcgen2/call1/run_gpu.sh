#!/bin/bash
# Device call 1 of branch mhcgen (run from the staged tree's root; results under $OUT):
# generic mhc_pre_backward with the new generic schedules against those of before (the
# ADJOINT_TUNE_GENERIC_* knobs at 0) and the specialized kernels, in one call.
set -u
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
       PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 ADJOINT_CACHE_DIR=/tmp/mhcgen-cache
OLD_ENV="ADJOINT_TUNE_GENERIC_TWIN=0 ADJOINT_TUNE_GENERIC_LANE_GROUPS=0 ADJOINT_TUNE_GENERIC_SPANS=0"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/device.txt 2>&1
cp STAGED_COMMIT $OUT/ 2>/dev/null
start=$SECONDS
# Kernel time: specialized (never), generic now (always), generic before (always, knobs 0).
timeout 110 python3 bench/bench_mhc_dynamic.py --parts time --runs 30 --timeout 50 \
  --baseline-env "${OLD_ENV// /,}" --out $OUT/mhc_dynamic.json > $OUT/mhc_dynamic.txt 2>&1
echo "bench rc=$? at $((SECONDS - start)) s" >> $OUT/steps.txt
# GPU parity of the generic kernels (every test_dynamic_shapes case, mhc among them) at token counts they were not compiled for, determinism.
timeout 60 python3 -m pytest -q tests/gpu/test_dynamic_shapes.py > $OUT/pytest_mhc.txt 2>&1
echo "pytest rc=$? at $((SECONDS - start)) s" >> $OUT/steps.txt
# Per-kernel times (torch.profiler) at 3 shapes.
timeout 22 python3 tests/gpu/mhc_kernel_profile.py --generic mhc_pre_backward > $OUT/profile_generic.txt 2>&1
echo "profile generic rc=$? at $((SECONDS - start)) s" >> $OUT/steps.txt
env $OLD_ENV timeout 22 python3 tests/gpu/mhc_kernel_profile.py --generic mhc_pre_backward > $OUT/profile_generic_before.txt 2>&1
echo "profile generic before rc=$? at $((SECONDS - start)) s" >> $OUT/steps.txt
timeout 20 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward > $OUT/profile_specialized.txt 2>&1
echo "profile specialized rc=$? at $((SECONDS - start)) s" >> $OUT/steps.txt
