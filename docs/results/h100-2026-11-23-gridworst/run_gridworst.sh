#!/usr/bin/env bash
# gridworst's one GPU call: one-cell profile, grid_sampler parity/determinism, bench rows; chunk 64 (new) and 0 (the old order) side by side.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so
L=$OUT/log.txt; P=$OUT/pytest.txt
{ date -u; nvidia-smi -L; } > "$L" 2>&1
echo "### one-cell, chunk 64" >> "$L"
ADJOINT_CACHE_DIR=/tmp/c64 timeout 30 python3 tests/gpu/grid_sampler_kernel_profile.py --one-cell --shapes "" >> "$L" 2>&1; echo "rc=$? $SECONDS s" >> "$L"
echo "### one-cell, chunk 0 (old order)" >> "$L"
ADJOINT_CACHE_DIR=/tmp/c0 ADJOINT_TUNE_BINNED_GATHER_CHUNK=0 timeout 30 python3 tests/gpu/grid_sampler_kernel_profile.py --one-cell --shapes "" >> "$L" 2>&1; echo "rc=$? $SECONDS s" >> "$L"
ADJOINT_CACHE_DIR=/tmp/c64 timeout 55 python3 -m pytest tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py -q -n 4 -p no:cacheprovider -rfEs --tb=short > "$P" 2>&1; echo "pytest rc=$? $SECONDS s" >> "$L"
echo "### bench chunk 64" >> "$L"
ADJOINT_CACHE_DIR=/tmp/c64 timeout 25 python3 bench/bench_grid_sampler.py --dtypes f32 --paddings zeros --runs 30 --out "$OUT/bench64.json" >> "$L" 2>&1; echo "rc=$? $SECONDS s" >> "$L"
echo "### bench chunk 0 (old order)" >> "$L"
ADJOINT_CACHE_DIR=/tmp/c0 ADJOINT_TUNE_BINNED_GATHER_CHUNK=0 timeout 25 python3 bench/bench_grid_sampler.py --dtypes f32 --paddings zeros --runs 30 --out "$OUT/bench0.json" >> "$L" 2>&1; echo "rc=$? $SECONDS s" >> "$L"
tail -3 "$P" >> "$L"
