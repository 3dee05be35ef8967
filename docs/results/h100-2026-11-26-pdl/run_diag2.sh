cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
ADJOINT_CACHE_DIR=/tmp/e1 timeout 100 python3 .stage/diag2.py 2>&1 | grep -v -i warn > $OUT/diag2_pdl2.txt
ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 ADJOINT_CACHE_DIR=/tmp/e2 timeout 100 python3 .stage/diag2.py 2>&1 | grep -v -i warn > $OUT/diag2_pdl0.txt
./.stage/build/bin/adjoint cuda "upsample_nearest2d_backward dtype=bf16 input_size=3,129,54,181 output_size=54,181" > $OUT/up_identity.cu 2>&1
