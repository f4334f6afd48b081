#!/bin/bash
# Session 18, device run 3. N = main 2f3a532 with the top-k mends (topk_select.cuh's Level helper
# shared by select_row and select_short, push_parts without part 1's count, one launch config in
# topk.cu): its top-k check and compute-sanitizer memcheck / racecheck. S2 / S4 = N with the
# routed gate_up kernel's units claimed in runs of 2 / 4 from a counter after each block's first
# run (experiments/moe-steal.patch: a test of whether the static split's tail costs time). Logits
# byte for byte against M = main; the step alternating M, N, S2, S4, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
arms="N S2 S4"
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
for round in 1 2 3; do
  echo "round $round"
  arm M build-exp/M
  for a in $arms; do arm $a build-exp/$a; done
done
cp /tmp/*.log $OUT/ 2>/dev/null
timeout 90 build-exp/N/frank_topk_check > $OUT/topk-check.log 2>&1; echo "topk_check rc=$? $(tail -1 $OUT/topk-check.log)"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 100 $CS --tool $tool build-exp/N/frank_topk_check --small > $OUT/sanitizer-$tool.log 2>&1
  echo "compute-sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard' $OUT/sanitizer-$tool.log | tail -1) $(grep -E '^PASS|^FAIL' $OUT/sanitizer-$tool.log)"
done
