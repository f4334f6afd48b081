#!/bin/bash
# Session 16, device run 4: FRANK_STREAM_PRIORITY=3, the branch stream first for attention's side
# chain but not for the MoE's shared expert (its launches carry priority 0), against 1 (branch
# first everywhere) and the default; with the CSA diagnostics (FRANK_DIAG_CSA=1 no top-k, 2 no
# scores either). Logits byte for byte, then the step, alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
P=build-exp/P
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  $P/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
  FRANK_STREAM_PRIORITY=3 $P/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/b.bin > /tmp/l.log 2>&1
  echo "logits $mode: default vs priority 3 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, env...
  local name=$1 bin=$2; shift 2
  env "$@" timeout 120 $bin/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm default $P X=0
  arm prio1 $P FRANK_STREAM_PRIORITY=1
  arm prio3 $P FRANK_STREAM_PRIORITY=3
  arm prio3_no_topk $P FRANK_STREAM_PRIORITY=3 FRANK_DIAG_CSA=1
  arm prio3_no_index $P FRANK_STREAM_PRIORITY=3 FRANK_DIAG_CSA=2
  arm default_no_index $P FRANK_DIAG_CSA=2
done
cp /tmp/default.log /tmp/prio3.log $OUT/
