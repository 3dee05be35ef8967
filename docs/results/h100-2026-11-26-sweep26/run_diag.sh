cd "$(dirname "$0")/.."
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
ADJOINT_CACHE_DIR=/tmp/d1 timeout 100 python3 .stage/diag_up.py > $OUT/diag_default.txt 2>&1
ADJOINT_DYNAMIC=never ADJOINT_CACHE_DIR=/tmp/d2 timeout 100 python3 .stage/diag_up.py > $OUT/diag_never.txt 2>&1
ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0 ADJOINT_CACHE_DIR=/tmp/d3 timeout 100 python3 .stage/diag_up.py > $OUT/diag_pdl0.txt 2>&1
