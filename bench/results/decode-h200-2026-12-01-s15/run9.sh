#!/bin/bash
# Session 15, device run 9: run 5's two-stage MoE kernels with the missing zero partials written (a
# warp whose slice holds no chunk), to see whether the down variant (-2 us in run 5) holds up
# correct. FRANK_MOE_PIPE (experiment-only): 1 gate_up, 2 down, 3 both. Checks: the MoE op check
# with each setting, the tiny model's logits byte for byte against main's kernels; then the step,
# alternating, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
Q=build-exp/Q
for v in 2 3; do
  FRANK_MOE_PIPE=$v timeout 200 $Q/frank_cuda_ops_check --only moe > $OUT/ops-moe-pipe$v.log 2>&1; echo "ops_check moe (FRANK_MOE_PIPE=$v) rc=$? $(grep -c PASS $OUT/ops-moe-pipe$v.log) PASS $(grep -c FAIL $OUT/ops-moe-pipe$v.log) FAIL"
  grep FAIL $OUT/ops-moe-pipe$v.log | head -3
done
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $Q/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    for v in 2 3; do
      FRANK_MOE_PIPE=$v $Q/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
      echo "logits $mode $w: main vs FRANK_MOE_PIPE=$v $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
    done
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $Q/frank $cmd "${EXTRA[@]}" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm main X=0
  arm down FRANK_MOE_PIPE=2
done
cp /tmp/main.log /tmp/down.log $OUT/
EXTRA=(--tokens-per-step 4 --same-experts)
for round in 1 2; do arm main4 X=0; arm down4 FRANK_MOE_PIPE=2; done
