#!/bin/bash
# Branch tokflat's one device call (issue 12: per-token mHC ops generic through one flattened token
# axis), run from the staged tree's root: GPU parity and determinism of the generic programs at
# token counts they were not compiled for (tests/gpu/test_dynamic_shapes.py -k mhc), and generic
# against specialized kernel time of the five per-token ops on two shapes, with the generic
# kernels of before (ADJOINT_TUNE_TOKEN_PAIR=0: lower_generic's pipeline) in the same session.
set -u
OUT=${OUT:-/tmp/tokflat-out}
mkdir -p "$OUT"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
OPS=mhc_pre,mhc_post,mhc_post_backward,mhc_sinkhorn,mhc_sinkhorn_backward
SHAPES=1x4096x4x4096,2x2048x6x1024
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build/STAGED
  echo "== pytest"; SECONDS=0
  ADJOINT_PARITY_JSONL=$OUT/parity.jsonl timeout 80 python3 -m pytest -v -p no:cacheprovider \
    tests/gpu/test_dynamic_shapes.py -k mhc > "$OUT/pytest.txt" 2>&1; echo "rc=$? ${SECONDS}s"
  tail -3 "$OUT/pytest.txt"
  echo "== time"; SECONDS=0
  timeout 120 python3 bench/bench_mhc_dynamic.py --parts time --op $OPS --shapes $SHAPES --runs 20 \
    --variants "before:ADJOINT_TUNE_TOKEN_PAIR=0" --out "$OUT/time.json"; echo "rc=$? ${SECONDS}s"
} > "$OUT/console.txt" 2>&1
