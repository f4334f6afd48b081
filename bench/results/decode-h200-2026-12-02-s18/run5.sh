#!/bin/bash
# Session 18, device run 5: where the CSA layer's main compressor push goes. M = main 2f3a532 (the
# push after the K=V row's norm on the main chain, beside q_b); C1 = the push first on the branch
# (before the indexer's compressor push); C2 = the push last on the branch (after the top-k)
# (experiments/csa-compress-on-branch.patch, on bc7d041). Which chain is longer decides the sign.
# Logits byte for byte against M; the step alternating M, C1, C2, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
arms="C1 C2"
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    build-exp/M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/M.bin > /dev/null 2>&1
    for a in $arms; do
      build-exp/$a/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/$a.bin > /dev/null 2>&1
      echo "logits $mode $w: M vs $a $(cmp -s /tmp/M.bin /tmp/$a.bin && echo identical || echo DIFFER)"
    done
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, extra args...
  local name=$1 bin=$2; shift 2
  timeout 120 $bin/frank $cmd "$@" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) layers $(grep -E '^\| [0-3] ' /tmp/$name.log | cut -d'|' -f5 | tr -d ' ' | tr '\n' ' ') $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm M build-exp/M
  for a in $arms; do arm $a build-exp/$a; done
done
cp /tmp/*.log $OUT/ 2>/dev/null
