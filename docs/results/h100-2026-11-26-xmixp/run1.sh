#!/bin/bash
# Call 1 (xmixp): x_mix's partials of mhc_pre_backward as they are (ncu sections + stall
# reasons) and the tile variants the knobs can already build (per-kernel times, digests).
cd "$(dirname "$0")"
export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
{ nvidia-smi -L; cat build/STAGED 2>/dev/null; } > $OUT/device.txt
SECS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats"
ST=""
for r in barrier long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle mio_throttle lg_throttle dispatch_stall no_instruction imc_miss branch_resolving drain membar misc tex_throttle sleeping; do ST="$ST,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
ST="${ST#,},sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_op_shared_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,dram__bytes_read.sum,smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
profile() {  # name envs...: ncu sections, then the stall reasons, of x_mix's partials at D4096
  local name=$1; shift
  echo "##### x_mix partials, $name ($*)"
  env "$@" timeout 24 ncu --kernel-name regex:'x_mix_x_mix_partials' --launch-count 1 $SECS python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF=="
  echo "##### stall reasons, $name"
  env "$@" timeout 18 ncu --kernel-name regex:'x_mix_x_mix_partials' --launch-count 1 --metrics "$ST" python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF==" | grep -v "^  *---"
  echo "after ncu $name $(el) s" >> $OUT/device.txt
}
profile base ADJOINT_TUNE_TILE_UNIFORM_RING=1 > $OUT/ncu1-base.txt 2>&1
MB4=ADJOINT_TUNE_TILE_MIN_BLOCKS=4
V4=ADJOINT_TUNE_TILE_ACCUMULATORS=96,$MB4
LEFT=$(( 180 - $(el) ))
timeout $((LEFT + 5)) python3 tests/gpu/mhc_backward_sweep.py --budget $LEFT --runs 20 --shapes 1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512 \
  base: mb4:$MB4 v4g8:$V4 v4g8p16:$V4,ADJOINT_TUNE_TILE_PREFETCH=16 v4g16:$V4,ADJOINT_TUNE_SPLIT_THREADS=21 > $OUT/sweep1.txt 2>&1
echo "after sweep $(el) s" >> $OUT/device.txt
if [ $(el) -lt 190 ]; then
  profile v4g8p16 ADJOINT_TUNE_TILE_ACCUMULATORS=96 ADJOINT_TUNE_TILE_MIN_BLOCKS=4 ADJOINT_TUNE_TILE_PREFETCH=16 > $OUT/ncu1-v4g8p16.txt 2>&1
fi
echo "end $(el) s" >> $OUT/device.txt
