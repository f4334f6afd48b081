#!/bin/bash
# Session 13, device run 7: the benchmark times the step on a graph without the per-layer event
# nodes (B = main + that change in decode_bench.cpp; its layer rows still come from a graph with
# them, whose step time it prints too). E = main before it (run 5's binary, no switch set).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/M/frank $cmd > $OUT/dec-E-$round.log 2>&1; echo "round $round E: $(grep '^| step' $OUT/dec-E-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-E-$round.log)"
  build-exp/B/frank $cmd > $OUT/dec-B-$round.log 2>&1; echo "round $round B: $(grep '^| step' $OUT/dec-B-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-B-$round.log) | $(grep -o 'which took [0-9.]* us ([0-9.-]*)' $OUT/dec-B-$round.log)"
done
for T in 2 4; do
  build-exp/B/frank $cmd --tokens-per-step $T --same-experts > $OUT/dec-B-T$T.log 2>&1; echo "B T=$T: $(grep '^| step' $OUT/dec-B-T$T.log) | $(grep -o 'which took [0-9.]* us ([0-9.-]*)' $OUT/dec-B-T$T.log)"
done
rm -f $OUT/dec-E-1.log $OUT/dec-E-2.log $OUT/dec-B-1.log $OUT/dec-B-2.log
cat $OUT/dec-B-3.log
