#!/usr/bin/env bash
# Cold prepare with the compiles in worker processes (ADJOINT_COMPILE_PROCESSES=1,
# runtime/compile_worker.h) against threads of the one process (the default), on the GPU
# machine: adjoint_jit_bench --cold-prepare-only per op (each figure a fresh process with empty
# adjoint and CUDA caches, median of 3), the two settings alternated twice; a process's
# second cold compile (workers warm) of the same two ops, two rounds; the disk-cache
# entries of a cold compile of grid_sampler bicubic and mhc_pre_backward with and without
# compared byte for byte; then bench/nvrtc_fixed_cost.py on that host's CPU (what NVRTC's fixed
# cost per compile is made of, headers, precompiled header, threads against processes).
# Usage: bench/cold_processes_ab.sh BUILD_DIR OUT_DIR
set -u
build=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cold_ab_lib.sh"
mkdir -p "$out"
{ nproc; lscpu | grep -E "Model name|Thread|Core|Socket"; } >"$out/host.txt" 2>&1
export ADJOINT_BENCH_COLD_SETTINGS="threads=ADJOINT_COMPILE_PROCESSES=0;\
processes=ADJOINT_COMPILE_PROCESSES=1;threads2=ADJOINT_COMPILE_PROCESSES=0;\
processes2=ADJOINT_COMPILE_PROCESSES=1"
cold_prepare_per_op "$build" "$out" upsample:20 bicubic:35 mhc:45
tmp=$(mktemp -d)
# A process's second cold compile (ADJOINT_BENCH_WARM_SPEC: the same op at another shape
# first, so NVRTC is set up and, with the knob, the workers run warm), no GPU needed.
bicubic='grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 interpolation_mode=bicubic padding_mode=zeros align_corners=false'
bicubic_warm='grid_sampler_2d_backward dtype=f32 input_size=8,64,96,96 output_size=96,96 interpolation_mode=bicubic padding_mode=zeros align_corners=false'
mhc='mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16'
mhc_warm='mhc_pre_backward batch=1 seq=4096 n=4 dim=2048 dtype=bf16'
{
  for round in 1 2; do
    for p in 0 1; do
      for op in bicubic mhc; do
        warm=${op}_warm
        rm -rf "$tmp/w" "$tmp/wc"  # NVRTC's own cache (CUDA_CACHE_PATH) too: else it serves
        echo "$op processes=$p round=$round $(ADJOINT_COMPILE_PROCESSES=$p ADJOINT_CACHE_DIR=$tmp/w \
          CUDA_CACHE_PATH=$tmp/wc ADJOINT_BENCH_WARM_SPEC="${!warm}" timeout 8 \
          "$build/bin/adjoint_jit_bench" --cold-compile-child "${!op}")"
      done
    done
  done
} >"$out/second_compile.txt" 2>&1
specs=("grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 interpolation_mode=bicubic padding_mode=zeros align_corners=false"
       "mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16")
{
  for i in 0 1; do
    for p in 0 1; do
      ADJOINT_COMPILE_PROCESSES=$p ADJOINT_CACHE_DIR=$tmp/a$i-$p CUDA_CACHE_PATH=$tmp/c$i-$p \
        timeout 8 "$build/bin/adjoint_jit_bench" --cold-compile-child "${specs[$i]}"
    done
    echo "disk cache entries, threads against processes: ${specs[$i]%% *}"
    same_entries "$tmp/a$i-0" "$tmp/a$i-1"
  done
} >"$out/identical.txt" 2>&1
rm -rf "$tmp"
timeout 40 python3 "$here/nvrtc_fixed_cost.py" --adjoint "$build/bin/adjoint" --reps 5 \
  --only grid_sampler >"$out/nvrtc_fixed_cost.json" 2>"$out/nvrtc_fixed_cost.err"
echo "nvrtc_fixed_cost rc=$?"
