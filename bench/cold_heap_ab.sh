#!/usr/bin/env bash
# Cold prepare with and without ADJOINT_TUNE_COMPILE_HEAP, on the GPU machine (docs/runtime.md,
# "Compile heap"): adjoint_jit_bench --cold-prepare-only per op (each figure a fresh process
# with empty adjoint and CUDA caches, median of 3) over settings that alternate the knob's
# levels with glibc tunables set from process start, fewer threads and grouped units, the
# baseline first and last; then proof that the knob leaves the compiled code alone (the disk
# cache entries of a cold prepare with the knob off and at 2 compared byte for byte).
# Usage: bench/cold_heap_ab.sh BUILD_DIR OUT_DIR
set -u
build=$1 out=$2
mkdir -p "$out"
{
  nproc; uname -r; cat /sys/kernel/mm/transparent_hugepage/enabled
  lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node\(s\)"; ldd --version | head -1
} >"$out/host.txt" 2>&1
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=2147483647
tunables=$tunables:glibc.malloc.top_pad=67108864:glibc.malloc.hugetlb=1
export ADJOINT_BENCH_COLD_SETTINGS="base=ADJOINT_TUNE_COMPILE_HEAP=0;\
heap1=ADJOINT_TUNE_COMPILE_HEAP=1;heap2=ADJOINT_TUNE_COMPILE_HEAP=2;\
tunables_thp=GLIBC_TUNABLES=$tunables;\
heap2_threads8=ADJOINT_TUNE_COMPILE_HEAP=2 ADJOINT_COMPILE_THREADS=8;\
heap2_units4=ADJOINT_TUNE_COMPILE_HEAP=2 ADJOINT_COMPILE_UNITS=4;base2=ADJOINT_TUNE_COMPILE_HEAP=0"
for case in upsample:30 bicubic:45 mhc:65; do
  op=${case%%:*}
  timeout "${case##*:}" "$build/bin/adjoint_jit_bench" --cold-prepare-only "$op" \
    >"$out/cold-$op.json" 2>"$out/cold-$op.err"
  echo "$op rc=$?"
done
spec='grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 interpolation_mode=bicubic padding_mode=zeros align_corners=false'
tmp=$(mktemp -d)
for level in 0 2; do
  ADJOINT_CACHE_DIR=$tmp/a$level CUDA_CACHE_PATH=$tmp/c$level ADJOINT_TUNE_COMPILE_HEAP=$level \
    "$build/bin/adjoint_jit_bench" --cold-prepare-child "$spec" >/dev/null
done
{
  echo "disk cache entries, knob 0 against 2 (bicubic, 18 kernels):"
  for f in "$tmp"/a0/*; do
    cmp -s "$f" "$tmp/a2/$(basename "$f")" && echo "same $(basename "$f")" || echo "DIFFERENT $(basename "$f")"
  done | sort | uniq -c -w 4
} >"$out/identical.txt" 2>&1
rm -rf "$tmp"
