#!/bin/bash
# Session 11, device run 2: B (run 1's: attention chains and the shared expert on the graph's
# branch) against C = B + the L2 prefetch of the next weights during the attention's mHC site and
# the hyper-head (FRANK_PREFETCH_MB: the bytes asked for at each, 0 = none), alternating.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
o=$OUT
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in B C8 C16 C32; do
    case $v in B) bin=build-exp/B/frank; mb=0;; C*) bin=build-exp/C/frank; mb=${v#C};; esac
    FRANK_PREFETCH_MB=$mb $bin $cmd > $o/dec-$v-$round.log 2>&1
    echo "round $round $v: $(grep '^| step' $o/dec-$v-$round.log) rc=$?"
  done
done
for v in B C8 C16 C32; do echo "$v (round 3):"; grep -E '^\| [0-9]|^\| head' $o/dec-$v-3.log; done
