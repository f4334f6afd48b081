#!/bin/bash
# Session 16, device run 2: the indexer kernel reading 4 dims at a time (16-byte shared-memory
# reads of rows kept as in memory; same sums in the same order) against run 1's binary (Q = main
# plus the experiment switches). Checks: the attention op check (indexer_scores against the CPU
# reference), the CUDA tests, the tiny model's logits byte for byte against Q's. Then the step,
# alternating, 3 rounds; FRANK_TOPK_TEAM forces the top-k's cluster size (experiment-only),
# FRANK_DIAG_CSA=1 skips the top-k (what is left of it on the critical path).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
Q=build-exp/Q N=build-exp/N
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
timeout 200 $N/frank_cuda_ops_check --only attention > $OUT/ops-attention.log 2>&1; echo "ops_check attention rc=$? $(grep -c PASS $OUT/ops-attention.log) PASS $(grep -c FAIL $OUT/ops-attention.log) FAIL"
grep "indexer" $OUT/ops-attention.log | head -8
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $Q/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    $N/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    echo "logits $mode $w: Q vs N $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, env...
  local name=$1 bin=$2; shift 2
  env "$@" timeout 120 $bin/frank $cmd > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm main $Q X=0
  arm indexer $N X=0
  arm team1 $N FRANK_TOPK_TEAM=1
  arm team4 $N FRANK_TOPK_TEAM=4
  arm no_topk $N FRANK_DIAG_CSA=1
done
cp /tmp/main.log /tmp/indexer.log $OUT/
timeout 400 $N/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$? $(tail -3 $OUT/cuda-tests.log | tr '\n' ' ')"
