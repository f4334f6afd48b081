#!/bin/bash
# Session 16, device run 1: is the CSA layer's indexer branch (index scores, then top-k, beside the
# queries' q_b on the main stream) the step's critical path? Diagnostic arms (experiment-only
# switches): FRANK_DIAG_CSA=1 skips the top-k (its output filled with index 0), =2 skips the
# scores too; FRANK_TOPK_PDL=1 launches the top-k as a programmatic dependent; FRANK_MOE_PIPE=2
# the two-stage MoE down kernel of session 15's run 9. Steps alternate, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
Q=build-exp/Q
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
FRANK_TOPK_PDL=1 timeout 200 $Q/frank_topk_check > $OUT/topk-pdl.log 2>&1; echo "topk_check (PDL) rc=$? $(tail -2 $OUT/topk-pdl.log | tr '\n' ' ')"
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  $Q/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
  FRANK_TOPK_PDL=1 $Q/frank logits --synthetic tiny --backend cuda --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
  echo "logits $mode: main vs FRANK_TOPK_PDL=1 $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $Q/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm main X=0
  arm no_topk FRANK_DIAG_CSA=1
  arm no_index FRANK_DIAG_CSA=2
  arm topk_pdl FRANK_TOPK_PDL=1
  arm down FRANK_MOE_PIPE=2
  arm both FRANK_MOE_PIPE=2 FRANK_TOPK_PDL=1
done
cp /tmp/main.log /tmp/no_topk.log $OUT/
