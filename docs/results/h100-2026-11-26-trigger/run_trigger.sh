cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/device.txt
for setting in early late plain; do
  case $setting in
    early) export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=2; unset ADJOINT_TUNE_NVRTC_OPTIONS;;
    late) export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=2 ADJOINT_TUNE_NVRTC_OPTIONS=-DADJOINT_PDL_LATE_TRIGGER;;
    plain) export ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0; unset ADJOINT_TUNE_NVRTC_OPTIONS;;
  esac
  ADJOINT_CACHE_DIR=/tmp/t$setting timeout 90 python3 bench/bench_mhc.py --no-compile --runs 30 --budget 70 --out $OUT/mhc_$setting.json --chart /tmp/m$setting.png > $OUT/mhc_$setting.txt 2>&1
  ADJOINT_CACHE_DIR=/tmp/t$setting timeout 80 python3 bench/bench_grid_sampler.py --shape-list 8x64x128x128:128x128,32x3x224x224:224x224,2x3x4x6:19x181,4x16x64x64:64x64 --modes bilinear,nearest,bicubic --paddings zeros --dtypes f32 --runs 30 --out $OUT/grid_$setting.json > $OUT/grid_$setting.txt 2>&1
  ADJOINT_CACHE_DIR=/tmp/t$setting timeout 40 python3 bench/bench_grid_sampler_3d.py --runs 30 --out $OUT/g3_$setting.json > $OUT/g3_$setting.txt 2>&1
done
cd $OUT && tar czf trigger.tgz mhc_* grid_* g3_* && rm -f mhc_* grid_* g3_*
