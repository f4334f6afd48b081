#!/bin/bash
# Session 13, device run 8: P = main (f4bd511) + the site's finishing block asking L1 for the
# streams and norm weights it will collapse, before it adds the partial sums. E = main (run 7's B).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
timeout 200 build-exp/P/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in B P; do
    build-exp/$v/frank $cmd > $OUT/dec-$v-$round.log 2>&1; echo "round $round $v: $(grep '^| step' $OUT/dec-$v-$round.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' $OUT/dec-$v-$round.log) | marked $(grep -o 'which took [0-9.]* us' $OUT/dec-$v-$round.log)"
  done
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-B-3.log $OUT/dec-P-3.log
rm -f $OUT/dec-*-1.log $OUT/dec-*-2.log
