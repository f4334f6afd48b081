#!/bin/bash
# Session 16, device run 3: stream priorities (experiment-only FRANK_STREAM_PRIORITY: 1 the branch
# stream at the device's greatest priority, 2 the main stream; kernel nodes carry their stream's
# priority, graphs instantiated with cudaGraphInstantiateFlagUseNodePriority). N is run 2's
# binary (the indexer change), P the same plus the switch. Logits byte for byte, then the step,
# alternating, 3 rounds; FRANK_DIAG_CSA=2 skips the indexer's scores and top-k.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
N=build-exp/N P=build-exp/P
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  $N/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
  for p in 1 2; do
    FRANK_STREAM_PRIORITY=$p $P/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/b.bin > /tmp/l.log 2>&1
    echo "logits $mode: N vs P priority $p $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER) $(tail -1 /tmp/l.log | cut -c1-100)"
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
  arm N $N X=0
  arm P $P X=0
  arm branch_first $P FRANK_STREAM_PRIORITY=1
  arm main_first $P FRANK_STREAM_PRIORITY=2
  arm branch_first_no_index $P FRANK_STREAM_PRIORITY=1 FRANK_DIAG_CSA=2
done
cp /tmp/N.log /tmp/branch_first.log /tmp/main_first.log $OUT/
