#!/bin/bash
# Session 12, device run 1: weights asked into the L2 by the mHC site's blocks once their own reads
# are done (FRANK_PREFETCH_MB per site, 0 = off; FRANK_PREFETCH_SITES: 1 attention, 2 MoE, 4 head),
# alternating in one binary; then the checks that the hint changes no value.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
P=build-exp/P
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
run() {  # name, MB, sites
  FRANK_PREFETCH_MB=$2 FRANK_PREFETCH_SITES=$3 $P/frank $cmd > $OUT/dec-$1.log 2>&1
  echo "$1 (MB $2 sites $3): $(grep '^| step' $OUT/dec-$1.log)"
}
for round in 1 2; do
  run off-$round 0 7; run mb8-$round 8 7; run mb16-$round 16 7; run mb24-$round 24 7; run mb32-$round 32 7
done
run attn24 24 1; run moe24 24 2; run head24 24 4; run moe40 40 2; run off-3 0 7
grep -E '^\| [0-9]|^\| head' $OUT/dec-off-3.log $OUT/dec-mb24-2.log
timeout 150 $P/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
timeout 200 $P/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED" $OUT/cuda-tests.log | tail -4
