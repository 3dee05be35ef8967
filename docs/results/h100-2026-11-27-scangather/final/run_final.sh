#!/bin/bash
# Final check on the last code commit (713f780: the scanned gather's dump line): the grid_sampler
# suites (parity with ATen, determinism over 3 runs) and gpu_api_test. Results in $OUT/final.
R=$OUT/final; mkdir -p $R
export ADJOINT_BUILD_DIR=$PWD/.stage/build ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python
{ nvidia-smi -L; cat .stage/build/STAGED; } > $R/device.txt 2>&1
timeout 150 python3 -m pytest -q -n 8 -p no:cacheprovider tests/gpu/test_grid_sampler.py tests/gpu/test_grid_sampler_3d.py tests/gpu/smoke.py > $R/pytest.txt 2>&1
echo "pytest rc=$?" >> $R/pytest.txt
timeout 60 .stage/build/bin/gpu_api_test > $R/gpu_api_test.txt 2>&1
echo "gpu_api_test rc=$?" >> $R/gpu_api_test.txt
{ cat $R/device.txt; tail -3 $R/pytest.txt; tail -3 $R/gpu_api_test.txt; } > $OUT/summary.txt
