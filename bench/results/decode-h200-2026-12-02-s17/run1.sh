#!/bin/bash
# Session 17, device run 1: the top-k for short rows (version 3: one block, the row's keys in
# registers, ~33 KB of shared memory) and the indexer's key tile loaded before its dependency wait.
# M = main (2d372f0); N = the working tree with experiment switches FRANK_EXP_TOPK (the version the
# CSA branch uses, 2 = main's) and FRANK_EXP_KEYS_EARLY. frank_topk_check (every version against
# the CPU reference) and its benchmark; logits byte for byte; the step, arms alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
M=build-exp/M N=build-exp/N
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
timeout 150 $N/frank_topk_check > $OUT/topk-check.log 2>&1; echo "topk_check rc=$?"; tail -6 $OUT/topk-check.log
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    FRANK_EXP_TOPK=3 $N/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    FRANK_EXP_TOPK=3 FRANK_EXP_KEYS_EARLY=1 $N/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/c.bin > /dev/null 2>&1
    echo "logits $mode $w: M vs N3 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER), M vs N3+early $(cmp -s /tmp/a.bin /tmp/c.bin && echo identical || echo DIFFER)"
  done
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
  arm N3e $N FRANK_EXP_TOPK=3 FRANK_EXP_KEYS_EARLY=1
  arm N2e $N FRANK_EXP_KEYS_EARLY=1
done
cp /tmp/M.log /tmp/N3.log /tmp/N3e.log $OUT/
timeout 200 $N/frank_topk_check --bench > $OUT/topk-bench.log 2>&1; echo "topk bench rc=$?"
grep -A12 "^rows  length |" $OUT/topk-bench.log | head -10
