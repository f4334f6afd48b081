#!/bin/bash
# Session 13, device run 5: is the CSA layer's indexer chain (the graph's side branch) on the
# step's critical path? An experiment-only switch drops its last kernels (results wrong, timing
# only): FRANK_ABLATE=topk skips the top-k (the selection is all entry 0), =index skips the scores
# and the top-k. Alternating with the unchanged step.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2; do
  for v in none topk index; do
    FRANK_ABLATE=$v build-exp/M/frank $cmd > $OUT/dec-$v-$round.log 2>&1
    echo "round $round $v: $(grep '^| step' $OUT/dec-$v-$round.log | cut -d'|' -f5) | CSA $(grep '^| 2 ' $OUT/dec-$v-$round.log | cut -d'|' -f5)"
  done
done
