#!/bin/bash
# Session 19, device run 6: final main bf951a9 (F). frank_topk_check with the new edge lengths on
# main's kernels; the step over 3 rounds and the 4-token verify step (same experts).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
build-exp/F/frank_topk_check > /tmp/topk_check.log 2>&1; echo "topk_check rc=$? $(tail -1 /tmp/topk_check.log)"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, extra args...
  local name=$1 bin=$2; shift 2
  timeout 120 $bin/frank $cmd "$@" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6,9-10) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) layers $(grep -E '^\| [0-3] ' /tmp/$name.log | cut -d'|' -f5 | tr -d ' ' | tr '\n' ' ') $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do arm F$round build-exp/F; done
arm F_t4 build-exp/F --tokens-per-step 4 --same-experts
cp /tmp/*.log $OUT/ 2>/dev/null
