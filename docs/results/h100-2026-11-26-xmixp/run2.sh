#!/bin/bash
# Call 2 (xmixp): A/B of the long tiles (ADJOINT_TUNE_TILE_ACCUMULATORS=64 restores the kernels
# before byte for byte) at the four split shapes, variants, misaligned digests, pytest, ncu.
cd "$(dirname "$0")"
export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
{ nvidia-smi -L; cat build/STAGED 2>/dev/null; } > $OUT/device.txt
SH=1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512
timeout 100 python3 tests/gpu/mhc_backward_sweep.py --budget 95 --runs 20 --shapes $SH \
  off:ADJOINT_TUNE_TILE_ACCUMULATORS=64 on: on_mb4:ADJOINT_TUNE_TILE_MIN_BLOCKS=4 on_p16:ADJOINT_TUNE_TILE_PREFETCH=16 > $OUT/sweep2.txt 2>&1
echo "after sweep $(el) s" >> $OUT/device.txt
timeout 30 python3 tests/gpu/mhc_backward_sweep.py --budget 28 --runs 5 --misaligned --shapes 1x4096x4x4096,2x2048x6x1024 \
  off:ADJOINT_TUNE_TILE_ACCUMULATORS=64 on: > $OUT/sweep2-misaligned.txt 2>&1
echo "after misaligned $(el) s" >> $OUT/device.txt
timeout 60 python3 -m pytest -q -x tests/gpu/test_mhc.py > $OUT/pytest-mhc.txt 2>&1; echo "pytest rc=$?" >> $OUT/pytest-mhc.txt
echo "after pytest $(el) s" >> $OUT/device.txt
if [ $(el) -lt 200 ]; then
  SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats"
  ST=""
  for r in barrier long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle dispatch_stall no_instruction branch_resolving; do ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
  ST="${ST#,},sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,dram__bytes_read.sum"
  BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
  { echo "##### x_mix partials, on (default)"
    timeout 20 ncu --kernel-name regex:'x_mix_x_mix_partials' --launch-count 1 $SECS --metrics "$ST" python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF=="
  } > $OUT/ncu2-on.txt 2>&1
fi
echo "end $(el) s" >> $OUT/device.txt
