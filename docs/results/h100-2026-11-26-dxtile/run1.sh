# Device call 1 (branch dxtile): ncu of mhc_dx and x_mix's partials at B1 S4096 n4 D4096 with
# one row (ADJOINT_TUNE_TILE_BLOCK_ROWS=0, the kernels of before) and the derived rows; the
# backward sweep (program ms, per-kernel us, output digests) of both and of 4 and 16 rows; the
# per-kernel profile (plain launches) of both. Run from the staged tree's root.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi -L > $OUT/device.txt 2>&1
R=docs/results/h100-2026-11-26-dxtile
timeout 75 python3 tests/gpu/mhc_backward_sweep.py --runs 10 --budget 70 base:ADJOINT_TUNE_TILE_BLOCK_ROWS=0 new: r4:ADJOINT_TUNE_TILE_BLOCK_ROWS=4 r16:ADJOINT_TUNE_TILE_BLOCK_ROWS=16 > $OUT/sweep1.txt 2>&1
SECTIONS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats"
METRICS="--metrics lts__t_sectors_srcunit_tex_op_read.sum,lts__t_bytes.sum,l1tex__t_sector_hit_rate.pct,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_lsu.sum,smsp__inst_executed.sum"
for rows in 0 -1; do
  ADJOINT_TUNE_TILE_BLOCK_ROWS=$rows timeout 45 ncu --kernel-name regex:'mhc_dx|x_mix_partials' --launch-count 2 $SECTIONS $METRICS python3 $R/ncu_once.py > $OUT/ncu-rows$rows.txt 2>&1
done
for rows in 0 -1; do
  ADJOINT_TUNE_TILE_BLOCK_ROWS=$rows timeout 25 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward > $OUT/profile-rows$rows.txt 2>&1
done
ls -la $OUT
