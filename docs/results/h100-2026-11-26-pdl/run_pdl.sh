cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
for pdl in 2 1 0; do
  ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=$pdl ADJOINT_CACHE_DIR=/tmp/p$pdl timeout 90 python3 bench/bench_mhc.py --no-compile --runs 30 --budget 70 --out $OUT/mhc_pdl$pdl.json --chart /tmp/m$pdl.png > $OUT/mhc_pdl$pdl.txt 2>&1
  ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=$pdl ADJOINT_CACHE_DIR=/tmp/p$pdl timeout 80 python3 bench/bench_grid_sampler.py --shape-list 8x64x128x128:128x128,32x3x224x224:224x224,2x3x4x6:19x181,4x16x64x64:64x64 --modes bilinear,nearest --paddings zeros --dtypes f32 --runs 30 --out $OUT/grid_pdl$pdl.json > $OUT/grid_pdl$pdl.txt 2>&1
  ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=$pdl ADJOINT_CACHE_DIR=/tmp/p$pdl timeout 40 python3 bench/bench_grid_sampler_3d.py --runs 30 --out $OUT/g3_pdl$pdl.json > $OUT/g3_pdl$pdl.txt 2>&1
done
cd $OUT && tar czf pdl.tgz mhc_pdl* grid_pdl* g3_pdl* && rm -f mhc_pdl* grid_pdl* g3_pdl*
