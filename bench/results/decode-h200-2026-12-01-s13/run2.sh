#!/bin/bash
# Session 13, device run 2: run 1's S with each computing warp keeping its x values while they
# stay the same (run 1 loaded them for every stage). Dense checks; decode step, off vs S.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
S=build-exp/S
timeout 200 $S/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2; do
  FRANK_STREAM_OFF=1 $S/frank $cmd > $OUT/dec-off-$round.log 2>&1; echo "round $round off:  $(grep '^| step' $OUT/dec-off-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-off-$round.log)"
  $S/frank $cmd > $OUT/dec-S-$round.log 2>&1; echo "round $round S:    $(grep '^| step' $OUT/dec-S-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-S-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-off-2.log $OUT/dec-S-2.log
