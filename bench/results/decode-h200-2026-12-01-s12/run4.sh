#!/bin/bash
# Session 12, device run 4: the mHC sites' arrival, three ways in one binary (FRANK_ARRIVAL,
# experiment only): 0 = main (every thread fences, thread 0 counts and fences), 1 = only thread 0
# fences, around its count (cooperative groups' grid-sync pattern), 2 = thread 0's count is one
# acq_rel atomic, no fences. Checks of each, then the step alternating.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
A=build-exp/A
for m in 0 1 2; do
  FRANK_ARRIVAL=$m timeout 150 $A/frank_cuda_ops_check --only dense > $OUT/ops-dense-$m.log 2>&1; echo "arrival $m: ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense-$m.log) PASS $(grep -c FAIL $OUT/ops-dense-$m.log) FAIL"
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for m in 0 1 2; do
    FRANK_ARRIVAL=$m $A/frank $cmd > $OUT/dec-a$m-$round.log 2>&1; echo "round $round arrival $m: $(grep '^| step' $OUT/dec-a$m-$round.log)"
  done
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-a0-3.log $OUT/dec-a2-3.log
