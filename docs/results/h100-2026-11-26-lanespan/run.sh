#!/bin/bash
# The device runs of branch lanespan: per-kernel times of mhc_pre_backward, mhc_pre and
# mhc_post_backward with the warp lanes of before (ADJOINT_TUNE_LANE_SPANS=0) and with lane
# spans, same machine, same call; unroll variants; determinism and misaligned bases; Nsight
# Compute sections of mhc_h_in and gate_grads (part 1); parity and the generic programs (part 2).
# Run from the staged tree: bash docs/results/h100-2026-11-26-lanespan/run.sh 1|2
set -u
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
O=${OUT:-out}; mkdir -p "$O"
nvidia-smi -L > "$O/device.txt" 2>&1
t() { local s=$SECONDS; "$@"; local rc=$?; echo "[$(( SECONDS - s )) s, rc $rc] $*" >> "$O/timeline.txt"; }
P=tests/gpu/mhc_kernel_profile.py
OPS="mhc_pre_backward mhc_pre mhc_post_backward"
NCU="ncu --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats"
if [[ ${1:-1} == 1 ]]; then  # part 1 (unroll derived as 4 halved past 8 span loads: gate_grads 1)
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 90 python3 -u $P $OPS > "$O/profile_before.txt" 2>&1
  t timeout 35 python3 -u $P $OPS > "$O/profile_after.txt" 2>&1
  t timeout 25 python3 -u tests/gpu/lane_span_check.py > "$O/determinism_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPAN_UNROLL=2 timeout 12 python3 -u $P mhc_pre_backward > "$O/profile_after_unroll2.txt" 2>&1
  t timeout 20 $NCU --kernel-name regex:'mhc_h_in' python3 -u $P mhc_pre > "$O/ncu_h_in.txt" 2>&1
  t timeout 20 $NCU --kernel-name regex:'gate_grads' python3 -u $P mhc_pre_backward > "$O/ncu_gate_grads_after.txt" 2>&1
else  # part 2 (unroll derived as 4 halved past 16 span loads: gate_grads 2, rms 4)
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 40 python3 -u $P $OPS > "$O/profile2_before.txt" 2>&1
  t timeout 25 python3 -u $P $OPS > "$O/profile2_after.txt" 2>&1
  t timeout 20 python3 -u tests/gpu/lane_span_check.py > "$O/determinism2_after.txt" 2>&1
  t timeout 55 python3 -m pytest -q -x tests/gpu/test_mhc.py tests/gpu/test_mhc_autograd.py > "$O/pytest_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPANS=0 timeout 18 python3 -u $P --generic mhc_pre_backward mhc_pre > "$O/profile2_generic_before.txt" 2>&1
  t timeout 14 python3 -u $P --generic mhc_pre_backward mhc_pre > "$O/profile2_generic_after.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPAN_UNROLL=4 timeout 8 python3 -u $P mhc_pre_backward > "$O/profile2_unroll4.txt" 2>&1
  t env ADJOINT_TUNE_LANE_SPAN_UNROLL=8 timeout 8 python3 -u $P mhc_pre > "$O/profile2_unroll8.txt" 2>&1
fi
cat "$O/timeline.txt"
