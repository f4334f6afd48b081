#!/bin/bash
# Session 13, device run 6: the CSA layer's indexer chain (run 5: on the step's critical path).
# N = main + the head weights' 1/sqrt(H) applied inside the scores kernel (one kernel fewer), the
# top-k launched as a programmatic dependent, and the scores kernel's key tile selectable for
# the experiment (FRANK_INDEXER_COLS = 64 as main, 32, 16; FRANK_TOPK_NOPDL=1: top-k as before).
# E = main (run 5's binary without its switch). Checks first.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
N=build-exp/N
for c in 64 32 16; do
  FRANK_INDEXER_COLS=$c timeout 150 $N/frank_cuda_ops_check --only attention > $OUT/ops-attention-$c.log 2>&1; echo "ops_check attention cols=$c rc=$? $(grep -c PASS $OUT/ops-attention-$c.log) PASS $(grep -c FAIL $OUT/ops-attention-$c.log) FAIL"
done
grep indexer_scores $OUT/ops-attention-16.log | head -3
timeout 200 $N/frank_topk_check > $OUT/topk-check.log 2>&1; echo "topk_check rc=$?"; tail -3 $OUT/topk-check.log
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2; do
  build-exp/M/frank $cmd > /tmp/d.log 2>&1; echo "round $round E:      $(grep '^| step' /tmp/d.log | cut -d'|' -f5) | CSA $(grep '^| 2 ' /tmp/d.log | cut -d'|' -f5) $(grep -o 'measured now: [0-9]*' /tmp/d.log)"
  for c in 64 32 16; do
    FRANK_INDEXER_COLS=$c $N/frank $cmd > /tmp/d.log 2>&1; echo "round $round N$c:    $(grep '^| step' /tmp/d.log | cut -d'|' -f5) | CSA $(grep '^| 2 ' /tmp/d.log | cut -d'|' -f5)"
  done
  FRANK_TOPK_NOPDL=1 $N/frank $cmd > /tmp/d.log 2>&1; echo "round $round N64 nopdl: $(grep '^| step' /tmp/d.log | cut -d'|' -f5) | CSA $(grep '^| 2 ' /tmp/d.log | cut -d'|' -f5)"
done
timeout 150 $N/frank_cuda_tests --gtest_filter='Fixtures/CudaGolden.*:CudaForward.*:CudaGraphs.*' > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -4
