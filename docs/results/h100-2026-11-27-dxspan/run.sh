#!/bin/bash
# The one device call of branch dxspan (issue 9: mhc_dx's epilogue). Run from the staged tree's
# root (.stage-dxspan: the branch's sources, its build, the bf16 check binaries). In order:
# 1. bf16_rounding.txt: all 2^32 floats through from_float<bfloat16> on the GPU, the default
#    (ADJOINT_BF16_CVT=1: cvt.rn.bf16.f32, NaN bits of the integer code) and =2 (the hardware's
#    NaN) against the integer code (tests/gpu/bf16_rounding_check.cu, built with nvcc on the host);
# 2. sweep.txt: mhc_pre_backward per-kernel times and digests at the four bench shapes, configs
#    old (both knobs off: the kernels of main), new (default: wide early reads + hardware
#    rounding), nocvt (wide reads, integer rounding), cvtonly (hardware rounding, element reads),
#    new2 (wide reads + the hardware's NaN, experiment), old2 (old again: drift);
# 3. sweep_pre.txt: mhc_pre (forward, bf16 h_in) old vs new rounding at the same shapes;
# 4. special.txt: NaN / infinity / subnormal / overflowing dx values, digests per config;
# 5. pytest.txt: tests/gpu/test_mhc.py and test_mhc_autograd.py (without torch.compile cases);
# 6. ncu-new.txt, ncu-old.txt: mhc_dx at D4096 (if time is left).
cd "$(dirname "$0")"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
{ nvidia-smi -L; cat build/STAGED 2>/dev/null; } > $OUT/device.txt 2>&1
{ ./bf16_check_1; echo "rc=$?"; ./bf16_check_2; echo "rc=$?"; } > $OUT/bf16_rounding.txt 2>&1
echo "after bf16 check $(el) s" >> $OUT/device.txt
OLD=ADJOINT_TUNE_TILE_EARLY_WIDE_READS=0,ADJOINT_TUNE_BF16_CVT=0
SHAPES=1x4096x4x4096,1x4096x4x2560,2x2048x6x1024,1x65536x4x512
timeout 112 python3 tests/gpu/mhc_backward_sweep.py --budget 105 --runs 20 --shapes $SHAPES \
  old:$OLD new: nocvt:ADJOINT_TUNE_BF16_CVT=0 cvtonly:ADJOINT_TUNE_TILE_EARLY_WIDE_READS=0 \
  new2:ADJOINT_TUNE_BF16_CVT=2 old2:$OLD > $OUT/sweep.txt 2>&1
echo "after sweep $(el) s" >> $OUT/device.txt
timeout 32 python3 tests/gpu/mhc_backward_sweep.py --op mhc_pre --budget 28 --runs 20 --shapes $SHAPES \
  old:ADJOINT_TUNE_BF16_CVT=0 new: > $OUT/sweep_pre.txt 2>&1
echo "after sweep_pre $(el) s" >> $OUT/device.txt
timeout 45 python3 tests/gpu/bf16_special_values.py new: old:$OLD nocvt:ADJOINT_TUNE_BF16_CVT=0 \
  cvtonly:ADJOINT_TUNE_TILE_EARLY_WIDE_READS=0 > $OUT/special.txt 2>&1 &
SPECIAL=$!
timeout 50 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_mhc.py tests/gpu/test_mhc_autograd.py \
  -k "not True and not compiled_module and not compiles" > $OUT/pytest.txt 2>&1
echo "pytest rc=$? after $(el) s" >> $OUT/device.txt
wait $SPECIAL
echo "special rc=$? after $(el) s" >> $OUT/device.txt
SECS="--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --section InstructionStats"
BWD="mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
profile() {
  local name=$1; shift
  echo "##### mhc_dx, $name ($*)"
  env ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 "$@" timeout 12 ncu --kernel-name regex:'mhc_dx' --launch-count 1 $SECS python3 tests/gpu/mhc_launch_once.py "$BWD" 2>&1 | grep -v "^==PROF==" | grep -v "^  *---"
  echo "after ncu $name $(el) s" >> $OUT/device.txt
}
for c in "new X=1" "old ADJOINT_TUNE_TILE_EARLY_WIDE_READS=0 ADJOINT_TUNE_BF16_CVT=0"; do
  [ $(el) -lt 212 ] && profile $c > $OUT/ncu-${c%% *}.txt 2>&1
done
echo "end $(el) s" >> $OUT/device.txt
