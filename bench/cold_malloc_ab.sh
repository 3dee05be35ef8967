#!/usr/bin/env bash
# Cold prepare under glibc's malloc tunables, on the GPU machine (docs/runtime.md, "The
# allocator and the page faults"): adjoint_jit_bench --cold-prepare-only per op (each figure a
# fresh process with empty adjoint and CUDA caches, median of 3, with its CPU time, page faults
# and context switches) with the tunables set from process start: transparent huge pages for
# malloc's memory alone, no trimming and no mmap of blocks up to 32 MiB alone, both; and
# ADJOINT_TUNE_COMPILE_HUGE_PAGES=1, the library's own approximation of them; the baseline
# first and last. Neither changes compiled code: the disk-cache entries of a cold prepare with
# and without are compared byte for byte.
# Usage: bench/cold_malloc_ab.sh BUILD_DIR OUT_DIR
set -u
build=$1 out=$2
source "$(cd "$(dirname "$0")" && pwd)/cold_ab_lib.sh"
mkdir -p "$out"
{
  nproc; uname -r; cat /sys/kernel/mm/transparent_hugepage/enabled
  lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node\(s\)"; ldd --version | head -1
} >"$out/host.txt" 2>&1
thp=glibc.malloc.hugetlb=1
keep=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=2147483647
keep=$keep:glibc.malloc.top_pad=67108864
export ADJOINT_BENCH_COLD_SETTINGS="base=GLIBC_TUNABLES=;knob=ADJOINT_TUNE_COMPILE_HUGE_PAGES=1;\
thp=GLIBC_TUNABLES=$thp;keep=GLIBC_TUNABLES=$keep;thp_keep=GLIBC_TUNABLES=$keep:$thp;\
base2=GLIBC_TUNABLES="
cold_prepare_per_op "$build" "$out" upsample:30 bicubic:45 mhc:65
spec='grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 interpolation_mode=bicubic padding_mode=zeros align_corners=false'
tmp=$(mktemp -d)
for setting in plain tuned knob; do
  tunables=; [[ $setting == tuned ]] && tunables=$keep:$thp
  knob=0; [[ $setting == knob ]] && knob=1
  GLIBC_TUNABLES=$tunables ADJOINT_TUNE_COMPILE_HUGE_PAGES=$knob ADJOINT_CACHE_DIR=$tmp/a-$setting \
    CUDA_CACHE_PATH=$tmp/c-$setting "$build/bin/adjoint_jit_bench" --cold-prepare-child "$spec" \
    >/dev/null
done
{
  for other in tuned knob; do
    echo "disk cache entries, plain against $other (grid_sampler bicubic, 18 kernels):"
    same_entries "$tmp/a-plain" "$tmp/a-$other"
  done
} >"$out/identical.txt" 2>&1
rm -rf "$tmp"
