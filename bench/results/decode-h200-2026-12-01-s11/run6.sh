#!/bin/bash
# Session 11, device run 6 (a measurement for the next step, not a change): the final code's step
# with every hc_post launch skipped (FRANK_SKIP_POST, an experiment-only switch, not in the
# repository; the output is wrong then), alternating with the normal step: what fusing hc_post
# into the next mHC site could save at most.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/X/frank $cmd > $OUT/dec-normal-$round.log 2>&1; echo "round $round normal: $(grep '^| step' $OUT/dec-normal-$round.log)"
  FRANK_SKIP_POST=1 build-exp/X/frank $cmd > $OUT/dec-nopost-$round.log 2>&1; echo "round $round no hc_post: $(grep '^| step' $OUT/dec-nopost-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-normal-3.log $OUT/dec-nopost-3.log
