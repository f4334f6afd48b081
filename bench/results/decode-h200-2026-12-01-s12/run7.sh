#!/bin/bash
# Session 12, device run 7: run 6 again with the early loads in their own kernel variant
# (linear_kernel<..., Early>, one bf16 token only), so that other linears keep their code. L with
# FRANK_LINEAR_EARLY bits (experiment only): 1 the attention's projections after the site, 2 the
# router after the MoE site, 4 the head after the hyper-head, 0 none; against E (main), alternating.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/E/frank $cmd > $OUT/dec-E-$round.log 2>&1; echo "round $round E: $(grep '^| step' $OUT/dec-E-$round.log)"
  FRANK_LINEAR_EARLY=0 build-exp/L/frank $cmd > $OUT/dec-L0-$round.log 2>&1; echo "round $round L0: $(grep '^| step' $OUT/dec-L0-$round.log)"
  FRANK_LINEAR_EARLY=7 build-exp/L/frank $cmd > $OUT/dec-L7-$round.log 2>&1; echo "round $round L7: $(grep '^| step' $OUT/dec-L7-$round.log)"
done
for m in 1 2 4; do
  FRANK_LINEAR_EARLY=$m build-exp/L/frank $cmd > $OUT/dec-L$m.log 2>&1; echo "L$m: $(grep '^| step' $OUT/dec-L$m.log)"
done
grep -h "measured now" $OUT/dec-E-3.log
grep -E '^\| [0-9]|^\| head' $OUT/dec-E-3.log $OUT/dec-L7-3.log
