#!/bin/bash
# Session 15, device run 1: L2 prefetch of the weights after a latency-bound stretch, on a side
# branch of the graph (experiment-only switches FRANK_PREFETCH = window bits, FRANK_PREFETCH_MB =
# bytes a window). Windows: 1 next layer's q_a, kv, q_b (issued before the MoE site's hc_post),
# 2 o_a, o_b (after q_b), 4 router + shared gate/up (before the attention site's hc_post),
# 8 the head (before the last hc_post). Alternating arms, 2 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
P=build-exp/P
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  local t0=$(date +%s)
  env "$@" timeout 120 $P/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) [$(( $(date +%s) - t0 ))s]"
}
for round in 1 2; do
  echo "round $round"
  arm base X=0
  arm all24 FRANK_PREFETCH=15 FRANK_PREFETCH_MB=24
  arm w1 FRANK_PREFETCH=1 FRANK_PREFETCH_MB=24
  arm w2 FRANK_PREFETCH=2 FRANK_PREFETCH_MB=24
  arm all12 FRANK_PREFETCH=15 FRANK_PREFETCH_MB=12
  arm w4 FRANK_PREFETCH=4 FRANK_PREFETCH_MB=24
  arm w8 FRANK_PREFETCH=8 FRANK_PREFETCH_MB=24
  arm all40 FRANK_PREFETCH=15 FRANK_PREFETCH_MB=40
done
cp /tmp/base.log /tmp/all24.log $OUT/
grep -A12 '^| layer' /tmp/base.log; grep -A12 '^| layer' /tmp/all24.log
