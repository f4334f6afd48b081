#!/bin/bash
# Session 17, device run 2: version 3 of the top-k as run 1 (47 registers a thread: a 1,024-thread
# block needs 48K of an SM's 64K registers, more than a linear block leaves free) against the same
# kernel held to 32 registers (__launch_bounds__(1024, 2): fits beside one linear block, with some
# spills), each with and without the linear kernels' preferred carveout at 28% (a 64 KB shared
# split, which holds the top-k's 33 KB and the indexer's 45 KB). M = main (2d372f0); N = the
# working tree with switches FRANK_EXP_TOPK, FRANK_EXP_TOPK_32REGS, FRANK_CARVEOUT_LINEAR.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
M=build-exp/M N=build-exp/N
FRANK_EXP_TOPK_32REGS=1 timeout 150 $N/frank_topk_check > $OUT/topk-check-32regs.log 2>&1; echo "topk_check (32 regs) rc=$?"; tail -2 $OUT/topk-check-32regs.log
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  $M/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
  FRANK_EXP_TOPK=3 FRANK_EXP_TOPK_32REGS=1 FRANK_CARVEOUT_LINEAR=28 $N/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
  echo "logits $mode: M vs N3, 32 regs, carveout 28 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, env...
  local name=$1 bin=$2; shift 2
  env "$@" timeout 120 $bin/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm M $M X=0
  arm N3 $N FRANK_EXP_TOPK=3
  arm N3r32 $N FRANK_EXP_TOPK=3 FRANK_EXP_TOPK_32REGS=1
  arm N3c28 $N FRANK_EXP_TOPK=3 FRANK_CARVEOUT_LINEAR=28
  arm N3r32c28 $N FRANK_EXP_TOPK=3 FRANK_EXP_TOPK_32REGS=1 FRANK_CARVEOUT_LINEAR=28
done
cp /tmp/N3r32.log /tmp/N3c28.log /tmp/N3r32c28.log $OUT/
