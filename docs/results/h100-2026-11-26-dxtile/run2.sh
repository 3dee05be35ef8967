# Device call 2 (branch dxtile, rows of at least a warp: 4 rows of 32 for dx): the backward
# sweep (5 shapes) of one row (ADJOINT_TUNE_TILE_BLOCK_ROWS=0, the kernels of before) and the
# derived rows; existing knobs on top of the rows at 3 shapes (a tile of 4 tokens, the k loop
# unrolled 4 or 24 times, a minimum of 5 blocks per SM, 16 partials of the token sums: other
# bits); the misaligned sweep of both (digests); pytest test_mhc.py; the per-kernel profile
# (plain launches) of both. Run from the staged tree's root.
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi -L > $OUT/device.txt 2>&1
timeout 45 python3 tests/gpu/mhc_backward_sweep.py --runs 10 --budget 43 base:ADJOINT_TUNE_TILE_BLOCK_ROWS=0 new: > $OUT/sweep2.txt 2>&1
timeout 58 python3 tests/gpu/mhc_backward_sweep.py --runs 10 --budget 56 --shapes 1x4096x4x4096,1x4096x4x2560,2x2048x6x1024 t4:ADJOINT_TUNE_THREAD_TILE=4 u4:ADJOINT_TUNE_TILE_UNROLL=4 u24:ADJOINT_TUNE_TILE_UNROLL=24 m5:ADJOINT_TUNE_TILE_MIN_BLOCKS=5 g16:ADJOINT_TUNE_REDUCTION_SPLIT=16 > $OUT/sweep2-knobs.txt 2>&1
timeout 25 python3 tests/gpu/mhc_backward_sweep.py --runs 3 --budget 24 --misaligned base:ADJOINT_TUNE_TILE_BLOCK_ROWS=0 new: > $OUT/sweep2-misaligned.txt 2>&1
timeout 40 python3 -m pytest -q -x tests/gpu/test_mhc.py > $OUT/pytest-mhc.txt 2>&1
for rows in 0 -1; do
  ADJOINT_TUNE_TILE_BLOCK_ROWS=$rows timeout 12 python3 tests/gpu/mhc_kernel_profile.py mhc_pre_backward > $OUT/profile2-rows$rows.txt 2>&1
done
ls -la $OUT
