#!/bin/bash
# Session 13, device run 11: two constants, by experiment-only switches in one binary (K = main +
# the switches): the share of the GPU's blocks the shared expert's pass takes on the branch
# (FRANK_SHARED_SHARE: main 2 = half; 1 = all, 4 = a quarter) and the CSA top-k's cluster size for
# its ~8K-column rows (FRANK_TOPK_TEAM: main 0 = automatic, 2 blocks; 1 = one block).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2; do
  for v in "main" "FRANK_SHARED_SHARE=1" "FRANK_SHARED_SHARE=4" "FRANK_TOPK_TEAM=1"; do
    env $([ "$v" = main ] || echo "$v") build-exp/K/frank $cmd > /tmp/d.log 2>&1
    echo "round $round $v: $(grep '^| step' /tmp/d.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/d.log) | CSA $(grep '^| 2 ' /tmp/d.log | cut -d'|' -f5) | sliding $(grep '^| 0 ' /tmp/d.log | cut -d'|' -f5)"
  done
done
