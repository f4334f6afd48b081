#!/bin/bash
# Session 16, device run 7: run 6's N plus an experiment-only switch of the preferred shared-memory
# carveout of the linear kernels (FRANK_CARVEOUT_LINEAR=P%) or of the MoE kernels
# (FRANK_CARVEOUT_MOE): does putting the weight-streaming kernels in the shared-memory split the
# indexer (2 x 47 KB) and the top-k (~97 KB) need spare those a drain of their multiprocessors?
# Step, alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
X=build-exp/X
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $X/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm N X=0
  arm linear44 FRANK_CARVEOUT_LINEAR=44
  arm linear28 FRANK_CARVEOUT_LINEAR=28
  arm linear0 FRANK_CARVEOUT_LINEAR=0
  arm moe44 FRANK_CARVEOUT_MOE=44
done
