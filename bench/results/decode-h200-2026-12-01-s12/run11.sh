#!/bin/bash
# Session 12, device run 11: T2 = main (T, attend's first key early) + each warp's second key too
# where it is a ring row; against T, alternating. Then T2's attention checks.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for b in T T2; do
    build-exp/$b/frank $cmd > $OUT/dec-$b-$round.log 2>&1; echo "round $round $b: $(grep '^| step' $OUT/dec-$b-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-$b-$round.log)"
  done
done
timeout 60 build-exp/T2/frank_cuda_ops_check --only attention > $OUT/ops-attention.log 2>&1; echo "ops_check attention rc=$? $(grep -c PASS $OUT/ops-attention.log) PASS $(grep -c FAIL $OUT/ops-attention.log) FAIL"
