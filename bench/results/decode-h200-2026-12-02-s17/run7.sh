#!/bin/bash
# Session 17, device run 7: as run 6, with the pool's slots from one block scan of both parts'
# counts (no atomics) and each part's bitonic sort unrolled at a constant width. The phase trace
# (experiments/topk_trace.cu, this code); frank_topk_check; logits byte for byte; the step M / N3
# alternating, 3 rounds; the top-k bench.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
M=build-exp/M N=build-exp/N
.gpu/topk_trace
timeout 150 $N/frank_topk_check > $OUT/topk-check.log 2>&1; echo "topk_check rc=$?"; tail -5 $OUT/topk-check.log
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    FRANK_EXP_TOPK=3 $N/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    echo "logits $mode $w: M vs N3 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
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
done
cp /tmp/M.log /tmp/N3.log $OUT/
timeout 200 $N/frank_topk_check --bench > $OUT/topk-bench.log 2>&1; echo "topk bench rc=$?"
grep -A12 "^rows  length |" $OUT/topk-bench.log | head -10
