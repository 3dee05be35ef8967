#!/bin/bash
# The gridknobs device call (one call, <= 240 s): kernel ms of grid_sampler_2d/3d_backward's
# default program over bench_grid_sampler_knobs.py's 120 cases next to ATen, one process per
# setting (default; the scoped ADJOINT_TUNE_BINNED_REREAD_STREAMING=0; the global
# ADJOINT_TUNE_STREAMING=2, ADJOINT_TUNE_PARTIAL_UNROLL=4, ADJOINT_TUNE_GATHERED_ROWS=0; the
# default again), each knob only on the cases whose kernels it changes (cases/<name>.txt, from
# survey.py on the host); grid_sampler_bits.py's hashes in every process. First every program
# is compiled into the disk cache by parallel untimed processes. Run from the stage root
# (sources + build/): bash docs/results/h100-2026-11-27-gridknobs/run_gpu.sh
D=docs/results/h100-2026-11-27-gridknobs
R=$OUT/gk; mkdir -p $R
T0=$(date +%s)
el() { echo "$1 at $(( $(date +%s) - T0 )) s" | tee -a $R/progress.txt; }
left() { echo $(( ${BUDGET:-222} - ($(date +%s) - T0) )); }
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/gk-cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
PY=${PY:-python3}
B=bench/bench_grid_sampler_knobs.py
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.max.sm --format=csv,noheader; cat build/STAGED 2>/dev/null; } > $R/device.txt 2>&1
# 1. Compile every program of every setting, untimed, in parallel processes.
head -60 $D/cases/all.txt > $R/all_a.txt; tail -n +61 $D/cases/all.txt > $R/all_b.txt
head -48 $D/cases/stream2.txt > $R/stream2_a.txt; tail -n +49 $D/cases/stream2.txt > $R/stream2_b.txt
pids=()
for job in "default all_a" "default all_b" "stream2 stream2_a" "stream2 stream2_b"; do
  set -- $job; f=$R/$2.txt
  [ $1 = stream2 ] && e="ADJOINT_TUNE_STREAMING=2" || e="GK_SETTING=default"
  env $e timeout 80 $PY $B --prepare-only --cases $f > $R/prep_$2.txt 2>&1 & pids+=($!)
done
for job in "reread0 ADJOINT_TUNE_BINNED_REREAD_STREAMING=0" "unroll4 ADJOINT_TUNE_PARTIAL_UNROLL=4" "rows0 ADJOINT_TUNE_GATHERED_ROWS=0"; do
  set -- $job
  env $2 timeout 80 $PY $B --prepare-only --cases $D/cases/$1.txt > $R/prep_$1.txt 2>&1 & pids+=($!)
done
for p in "${pids[@]}"; do wait $p; done
el "precompile"
# 2. Timed, one process per setting, in sequence.
BITS="32x3x224x224:224x224 bilinear f32;32x3x224x224:224x224 bilinear bf16;8x64x128x128:128x128 bicubic f32;2x16x32x32x32:32x32x32 bilinear bf16;4x32x256x256:256x256 nearest f32"
RUNS=${RUNS:-30}
timed() {  # label cases env
  local l=$(left); [ $l -lt 15 ] && { el "skip $1"; return; }
  env $3 timeout $l $PY $B --label $1 --cases $2 --runs $RUNS --warmup 3 --deadline $(( l - 12 )) \
    --bits "$BITS" --out $R/$1.json > $R/$1.txt 2>&1
  echo "rc=$?" >> $R/$1.txt; el "$1"
}
timed default $D/cases/all.txt GK_SETTING=default
timed reread0 $D/cases/reread0.txt ADJOINT_TUNE_BINNED_REREAD_STREAMING=0
timed stream2 $D/cases/stream2.txt ADJOINT_TUNE_STREAMING=2
timed unroll4 $D/cases/unroll4.txt ADJOINT_TUNE_PARTIAL_UNROLL=4
timed rows0 $D/cases/rows0.txt ADJOINT_TUNE_GATHERED_ROWS=0
timed default2 $D/cases/all.txt GK_SETTING=default
tar -czf $OUT/gk.tgz -C $OUT gk
{ cat $R/device.txt $R/progress.txt; tail -n 2 $R/prep_*.txt; for f in default reread0 stream2 unroll4 rows0 default2; do echo "== $f"; grep -E "^(ERROR|[a-z]+ (f32|bf16) )|cases,|rc=" $R/$f.txt; done; } > $OUT/summary.txt 2>&1
