#!/bin/bash
# Session 12, device run 10: T = main + attend's first key (a window ring row) asked for before its
# wait for the previous kernel; against E (main), alternating. Then T's attention checks and the
# forward tests.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
T=build-exp/T
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/E/frank $cmd > $OUT/dec-E-$round.log 2>&1; echo "round $round E: $(grep '^| step' $OUT/dec-E-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-E-$round.log)"
  $T/frank $cmd > $OUT/dec-T-$round.log 2>&1; echo "round $round T: $(grep '^| step' $OUT/dec-T-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-T-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-E-3.log $OUT/dec-T-3.log
timeout 100 $T/frank_cuda_ops_check --only attention > $OUT/ops-attention.log 2>&1; echo "ops_check attention rc=$? $(grep -c PASS $OUT/ops-attention.log) PASS $(grep -c FAIL $OUT/ops-attention.log) FAIL"
timeout 120 $T/frank_cuda_tests --gtest_filter='Fixtures/CudaGolden.*:CudaForward.*:CudaGraphs.*:CudaKv*' > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -4
