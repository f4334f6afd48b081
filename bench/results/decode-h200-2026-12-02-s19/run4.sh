#!/bin/bash
# Session 19, device run 4: upper bounds, not candidates. M = main d14c18d. X = M with an
# experiment-only switch FRANK_SKIP (experiments/skip-switch.patch) that drops ops from the step
# (results wrong, timing only): 1 = the q_a RMSNorm (every layer), 2 = the index queries' RoPE
# (CSA), 4 = the queries' norm+RoPE, 8 = the K=V row's norm+RoPE, 16 = the window ring's store.
# X with 0 must equal M byte for byte. The step alternating the arms over 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  build-exp/M/frank logits --synthetic tiny --backend cuda --weights-dtype bf16 --ids $ids --mode $mode --out /tmp/M.bin > /dev/null 2>&1
  FRANK_SKIP=0 build-exp/X/frank logits --synthetic tiny --backend cuda --weights-dtype bf16 --ids $ids --mode $mode --out /tmp/X.bin > /dev/null 2>&1
  echo "logits $mode bf16: M vs X(0) $(cmp -s /tmp/M.bin /tmp/X.bin && echo identical || echo DIFFER)"
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
  for b in 0 1 2 4 8 16; do FRANK_SKIP=$b arm X$b build-exp/X; done
done
cp /tmp/*.log $OUT/ 2>/dev/null
