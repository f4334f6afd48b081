#!/bin/bash
# Session 17, device run 9: the code as it lands (N: the CSA layer's top-k is version 3, run 7's
# kernel; no experiment switches) against main before it (M = 2d372f0). N's op checks; logits byte
# for byte M vs N; the step alternating M / N: decode 3 rounds, the 4-token verify step (same
# experts) 2 rounds, the shipped FP8/FP4 format 2 rounds; N's CUDA tests; frank_topk_check and
# compute-sanitizer memcheck / racecheck on its small cases.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
M=build-exp/M N=build-exp/N
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
timeout 200 $N/frank_cuda_ops_check > $OUT/ops-check.log 2>&1; echo "ops_check rc=$? $(grep -c PASS $OUT/ops-check.log) PASS $(grep -c FAIL $OUT/ops-check.log) FAIL"
grep FAIL $OUT/ops-check.log | head -5
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    $N/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    echo "logits $mode $w: M vs N $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER)"
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, extra args...
  local name=$1 bin=$2; shift 2
  timeout 120 $bin/frank $cmd "$@" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm M $M
  arm N $N
done
cp /tmp/M.log /tmp/N.log $OUT/
for round in 1 2; do
  arm M4 $M --tokens-per-step 4 --same-experts
  arm N4 $N --tokens-per-step 4 --same-experts
  arm Mq $M --format fp8-fp4
  arm Nq $N --format fp8-fp4
done
cp /tmp/N4.log /tmp/Nq.log $OUT/
timeout 200 $N/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $OUT/cuda-tests.log | tr '\n' ' ')"
timeout 60 $N/frank_topk_check > $OUT/topk-check.log 2>&1; echo "topk_check rc=$? $(tail -1 $OUT/topk-check.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 60 $CS --tool $tool $N/frank_topk_check --small > $OUT/sanitizer-$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $OUT/sanitizer-$tool.log | tail -1) $(grep -E '^PASS|^FAIL' $OUT/sanitizer-$tool.log)"
done
