#!/usr/bin/env bash
# debts: one GPU smoke of branch debts (temporary arena planned at load; ops::BuildOptions):
# gpu_api_test (every op's example against the interpreter, default arena), then the grid_sampler
# and mhc parity tests under the default arena and the mhc ones with ADJOINT_TUNE_TEMPORARY_ARENA=0.
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
out=${OUT:-/tmp/debts-out}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build/STAGED; } >"$out/env.txt" 2>&1
timeout 50 build/bin/gpu_api_test --gtest_brief=1 >"$out/gpu_api_test.txt" 2>&1
echo "gpu_api_test rc=$?" | tee -a "$out/summary.txt"
timeout 45 python3 -m pytest tests/gpu/test_grid_sampler.py tests/gpu/test_mhc.py -q -p no:cacheprovider \
  -n 8 >"$out/pytest_arena1.txt" 2>&1
echo "pytest arena=1 rc=$? $(tail -1 "$out/pytest_arena1.txt")" | tee -a "$out/summary.txt"
ADJOINT_TUNE_TEMPORARY_ARENA=0 timeout 15 python3 -m pytest tests/gpu/test_mhc.py -q \
  -p no:cacheprovider -n 8 >"$out/pytest_arena0.txt" 2>&1
echo "pytest arena=0 rc=$? $(tail -1 "$out/pytest_arena0.txt")" | tee -a "$out/summary.txt"
