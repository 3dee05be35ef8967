#!/bin/bash
# The device runs of branch lanespan: per-kernel times of mhc_pre_backward and mhc_pre with the
# warp lanes of before (ADJOINT_TUNE_LANE_SPANS=0) and with lane spans, same machine, same call;
# unroll and 8-byte variants; determinism and misaligned bases; Nsight Compute sections of
# mhc_h_in and gate_grads (part 1); parity, the generic programs, the baseline again (part 2).
# Run from the staged tree: bash docs/results/h100-2026-11-26-lanespan/run.sh 1|2
set -u
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
O=${OUT:-out}; mkdir -p "$O"
nvidia-smi -L > "$O/device.txt" 2>&1
t() { local s=$SECONDS; "$@"; local rc=$?; echo "[$(( SECONDS - s )) s, rc $rc] $*" >> "$O/timeline.txt"; }
P=tests/gpu/mhc_kernel_profile.py
NCU="ncu --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
if [[ ${1:-1} == 1 ]]; then
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 90 python3 -u $P mhc_pre_backward mhc_pre mhc_post_backward > "$O/profile_before.txt" 2>&1
  t timeout 35 python3 -u $P mhc_pre_backward mhc_pre mhc_post_backward > "$O/profile_after.txt" 2>&1
  t timeout 25 python3 -u tests/gpu/lane_span_check.py > "$O/determinism_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPAN_UNROLL=2 timeout 12 python3 -u $P mhc_pre_backward > "$O/profile_after_unroll2.txt" 2>&1
  t timeout 20 $NCU --kernel-name regex:'mhc_h_in' python3 -u $P mhc_pre > "$O/ncu_h_in.txt" 2>&1
  t timeout 20 $NCU --kernel-name regex:'gate_grads' python3 -u $P mhc_pre_backward > "$O/ncu_gate_grads_after.txt" 2>&1
else
  t timeout 90 python3 -m pytest -q -x tests/gpu/test_mhc.py tests/gpu/test_mhc_autograd.py > "$O/pytest_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 30 python3 -u $P --generic > "$O/profile_generic_before.txt" 2>&1
  t timeout 20 python3 -u $P --generic > "$O/profile_generic_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 12 python3 -u $P > "$O/profile_before_again.txt" 2>&1
  t timeout 12 python3 -u $P > "$O/profile_after_again.txt" 2>&1
fi
cat "$O/timeline.txt"
