#!/bin/bash
# Session 18, device run 4. N = main 2f3a532 with the top-k mends (as run 3); NU = N with the
# indexer scores kernel's inner loop unrolled over the slice (kDepth) and __launch_bounds__(256, 1)
# (run 2's U64). N's CUDA tests; NU's attention op check (the indexer cases); logits byte for byte
# against M = main; the step alternating M, N, NU, 4 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
timeout 100 build-exp/NU/frank_cuda_ops_check --only attention > $OUT/ops-NU.log 2>&1
echo "ops_check attention NU rc=$? $(grep -c PASS $OUT/ops-NU.log) PASS $(grep -c FAIL $OUT/ops-NU.log) FAIL"
arms="N NU"
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
cp /tmp/*.log $OUT/ 2>/dev/null
timeout 200 build-exp/N/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $OUT/cuda-tests.log | tr '\n' ' ')"
