#!/bin/bash
# Session 19, device run 2. M = main 027a15e; N1 = run 1's arm (the indexer's compressor push on a
# second branch stream inside attention's side chain); N2 = N1 and, in CSA layers, the K=V row and
# the main compressor's push on a third stream beside the queries' q_b (CudaOps::concurrently splits
# the remaining streams between its two chains). Logits byte for byte against M; the step
# alternating M, N1, N2 over 4 rounds; the 4-token verify step (same experts) of each.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
arms="N1 N2"
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
for round in 1 2 3 4; do
  echo "round $round"
  arm M build-exp/M
  for a in $arms; do arm $a build-exp/$a; done
done
for a in M $arms; do arm ${a}_t4 build-exp/$a --tokens-per-step 4 --same-experts; done
cp /tmp/*.log $OUT/ 2>/dev/null
