#!/bin/bash
# Session 18, device run 6: the whole CUDA op check (every family) on main bc7d041 (the top-k
# mends landed), with the time it needs (session 17's run stopped at its 200 s limit).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
start=$(date +%s)
timeout 560 build-exp/F/frank_cuda_ops_check > $OUT/ops-check.log 2>&1
echo "ops_check rc=$? $(grep -c PASS $OUT/ops-check.log) PASS $(grep -c FAIL $OUT/ops-check.log) FAIL in $(( $(date +%s) - start )) s"
grep FAIL $OUT/ops-check.log | head -5
tail -3 $OUT/ops-check.log
