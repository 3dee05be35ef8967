# The one device call of branch mhctail (run from the staged copy .stage-mhctail: build/ is the
# branch at 8c8dcb1, mainlib/libadjoint.so main's build at 208bf9d).
cd .stage-mhctail && export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1 PYTHONUNBUFFERED=1
nvidia-smi -L > $OUT/device.txt 2>&1
timeout 70 python3 -m pytest -q -x tests/gpu/test_mhc.py > $OUT/test_mhc.txt 2>&1; echo "pytest rc=$?" >> $OUT/test_mhc.txt
timeout 110 python3 tests/gpu/mhc_backward_sweep.py --budget 100 --runs 20 --shapes 1x181x8x4096,1x127x4x2048,3x67x6x1536,1x4096x4x4096,2x2048x6x1024 main:ADJOINT_LIBRARY=$PWD/mainlib/libadjoint.so knob0:ADJOINT_TUNE_TILE_PARTIAL=0 new: > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/sweep.txt
timeout 40 python3 tests/gpu/mhc_backward_sweep.py --budget 35 --runs 20 --shapes 1x181x8x4096,1x127x4x2048,3x67x6x1536 r4:ADJOINT_TUNE_THREAD_TILE=4 > $OUT/sweep_r4.txt 2>&1; echo "r4 rc=$?" >> $OUT/sweep_r4.txt
