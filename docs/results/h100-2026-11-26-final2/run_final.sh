#!/bin/bash
cd "$(dirname "$0")/.."
ADJOINT_FASTLAUNCH=1 GPU_CHECK_SECONDS=330 GPU_CHECK_PYTEST_WORKERS=8 scripts/gpu-check "$OUT" gtest,pytest,sanitize > /dev/null 2>&1
echo "gpu-check rc=$?" >> $OUT/summary.txt
mkdir -p /tmp/cold
bash bench/cold_processes_ab.sh $PWD/.stage/build /tmp/cold > /tmp/cold/run.txt 2>&1 || true
cd /tmp/cold && tar czf $OUT/cold_processes.tgz .
