#!/bin/bash
# Session 16, device run 5: the shared-memory carveout (experiment-only FRANK_CARVEOUT=P: every
# step kernel's preferred carveout set to P%, so kernels that need different splits of L1 and
# shared memory do not force an SM to drain before the next one lands: 44% = 100 KB, enough for
# the top-k's ~97 KB), alone and with the branch first (FRANK_STREAM_PRIORITY=1). Logits byte for
# byte, then the step, alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
P=build-exp/P
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  $P/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
  FRANK_CARVEOUT=44 FRANK_STREAM_PRIORITY=1 $P/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/b.bin > /tmp/l.log 2>&1
  echo "logits $mode: default vs carveout 44 + priority 1 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
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
  arm c44 $P FRANK_CARVEOUT=44
  arm c100 $P FRANK_CARVEOUT=100
  arm c16 $P FRANK_CARVEOUT=16
  arm prio1 $P FRANK_STREAM_PRIORITY=1
  arm prio1_c44 $P FRANK_STREAM_PRIORITY=1 FRANK_CARVEOUT=44
  arm c44_no_topk $P FRANK_CARVEOUT=44 FRANK_DIAG_CSA=1
done
cp /tmp/default.log /tmp/c44.log /tmp/prio1_c44.log $OUT/
