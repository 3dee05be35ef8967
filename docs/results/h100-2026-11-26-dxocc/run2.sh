#!/bin/bash
# Call 2 (dxocc): the hardware bf16 rounding of call 1 (templates/adjoint_types.cuh,
# -DADJOINT_BF16_CVT=1 with the integer code's NaN bits, =2 the hardware's NaN) without the
# early copies (x and grad_h_in loaded as 16-byte spans after the reductions: with the copies,
# ptxas read the shared spans one bf16 at a time under the hardware rounding, 8x the LDS);
# baseline rerun in the same call (base, base2); per-kernel times and digests at the four bench
# shapes, then ncu of mhc_dx at D4096.
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
{ nvidia-smi -L; cat build/STAGED 2>/dev/null; } > $OUT/device.txt
CVT1=ADJOINT_TUNE_NVRTC_OPTIONS=-DADJOINT_BF16_CVT=1
CVT2=ADJOINT_TUNE_NVRTC_OPTIONS=-DADJOINT_BF16_CVT=2
E0=ADJOINT_TUNE_TILE_EARLY_COPIES=0
timeout 120 python3 tests/gpu/mhc_backward_sweep.py --budget 105 --runs 20 --shapes 1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512 \
  base: early0:$E0 cvtE:$CVT1,$E0 cvtrawE:$CVT2,$E0 cvtrawEmb5:$CVT2,$E0,ADJOINT_TUNE_TILE_MIN_BLOCKS=5 base2: > $OUT/sweep2.txt 2>&1
echo "after sweep $(el) s" >> $OUT/device.txt
SECS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats"
ST=""
for r in barrier long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle mio_throttle lg_throttle dispatch_stall no_instruction branch_resolving drain; do ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
ST="${ST#,},smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum"
BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
profile() {
  local name=$1; shift
  echo "##### mhc_dx, $name ($*)"
  env ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 "$@" timeout 25 ncu --kernel-name regex:'mhc_dx' --launch-count 1 $SECS --metrics "$ST" python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF==" | grep -v "^  *---"
  echo "after ncu $name $(el) s" >> $OUT/device.txt
}
for c in "base X=1" "cvtE $CVT1 $E0" "cvtrawE $CVT2 $E0"; do
  [ $(el) -lt 200 ] && profile $c > $OUT/ncu2-${c%% *}.txt 2>&1
done
echo "end $(el) s" >> $OUT/device.txt
