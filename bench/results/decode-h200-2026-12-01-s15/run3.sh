#!/bin/bash
# Session 15, device run 3: Sinkhorn out of the site kernel. hc_pre leaves comb as its logits and a
# one-warp kernel on a branch stream balances it beside the sublayer; hc_post waits for it.
# FRANK_SINKHORN_APART (experiment-only): 0 fused (main), 1 on the step's branch stream (shared
# with attention's side chain and the shared expert), 2 on a stream of its own. Alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
S=build-exp/S
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $S/frank $cmd "${EXTRA[@]}" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm fused FRANK_SINKHORN_APART=0
  arm branch FRANK_SINKHORN_APART=1
  arm own FRANK_SINKHORN_APART=2
done
cp /tmp/fused.log /tmp/branch.log /tmp/own.log $OUT/
EXTRA=(--tokens-per-step 4 --same-experts)
for round in 1 2; do
  arm fused4 FRANK_SINKHORN_APART=0
  arm own4 FRANK_SINKHORN_APART=2
done
grep -A8 '^| layer' /tmp/fused.log | head -8; grep -A8 '^| layer' /tmp/own.log | head -8
