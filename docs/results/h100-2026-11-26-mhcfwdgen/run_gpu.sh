#!/bin/bash
# Branch mhcfwdgen's one device call (issue 12: the mHC family generic in batch and seq), run from
# the staged tree's root: GPU parity and determinism of the generic programs at token counts they
# were not compiled for (tests/gpu/test_dynamic_shapes.py -k mhc), generic against specialized
# kernel time of the six ops on two large shapes, mhc_pre's compile count over 50 token counts
# under ADJOINT_DYNAMIC=auto, and the warp groups' knob (ADJOINT_TUNE_GENERIC_WARP_GROUPS 1 and 0
# against the default 2, in the same session; the digests compare results bit for bit).
set -u
OUT=${OUT:-/tmp/mhcfwdgen-out}
mkdir -p "$OUT"
export ADJOINT_BUILD_DIR=$PWD/build ADJOINT_LIBRARY=$PWD/build/lib/libadjoint.so \
  ADJOINT_CACHE_DIR=/tmp/adjoint-cache PYTHONPATH=$PWD/python ADJOINT_FASTLAUNCH=1
ALL=mhc_pre,mhc_pre_backward,mhc_post,mhc_post_backward,mhc_sinkhorn,mhc_sinkhorn_backward
SHAPES=1x4096x4x4096,2x2048x6x1024
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log -1 --oneline 2>/dev/null
  echo "== pytest"; SECONDS=0
  ADJOINT_PARITY_JSONL=$OUT/parity.jsonl timeout 75 python3 -m pytest -v -p no:cacheprovider \
    tests/gpu/test_dynamic_shapes.py -k mhc > "$OUT/pytest.txt" 2>&1; echo "rc=$? ${SECONDS}s"
  tail -3 "$OUT/pytest.txt"
  echo "== time"; SECONDS=0
  timeout 85 python3 bench/bench_mhc_dynamic.py --parts time --op $ALL --shapes $SHAPES --runs 20 \
    --out "$OUT/time.json"; echo "rc=$? ${SECONDS}s"
  echo "== sweep"; SECONDS=0
  timeout 35 python3 bench/bench_mhc_dynamic.py --parts sweep --op mhc_pre --sweep-count 50 \
    --out "$OUT/sweep.json"; echo "rc=$? ${SECONDS}s"
  for v in 1 0; do
    echo "== ADJOINT_TUNE_GENERIC_WARP_GROUPS=$v"; SECONDS=0
    ADJOINT_TUNE_GENERIC_WARP_GROUPS=$v timeout 25 python3 bench/bench_mhc_dynamic.py --parts time \
      --time-modes always --op mhc_pre,mhc_pre_backward,mhc_post_backward --shapes $SHAPES \
      --runs 20 --out "$OUT/time_warp$v.json"; echo "rc=$? ${SECONDS}s"
  done
} > "$OUT/console.txt" 2>&1
