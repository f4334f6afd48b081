#!/bin/bash
# Session 14, device run 1: F = main + hc_post fused into the next site (hc_post_pre /
# hc_post_head: the written-back values computed where they are read, stored by the finishing
# block). FRANK_UNFUSED_POST=1 (experiment-only switch) runs hc_post then hc_pre / hc_head instead.
# The dense ops (bit identity of the fused ops), the decode step alternating, the forward tests.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
F=build-exp/F
timeout 200 $F/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
grep -E "hc_post_(pre|head)" $OUT/ops-dense.log | grep -v PASS | head
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  FRANK_UNFUSED_POST=1 $F/frank $cmd > /tmp/u.log 2>&1; echo "round $round unfused: $(grep '^| step' /tmp/u.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/u.log)"
  $F/frank $cmd > /tmp/f.log 2>&1; echo "round $round fused:   $(grep '^| step' /tmp/f.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/f.log)"
done
cp /tmp/u.log $OUT/bench-unfused.log; cp /tmp/f.log $OUT/bench-fused.log
timeout 250 $F/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -6
