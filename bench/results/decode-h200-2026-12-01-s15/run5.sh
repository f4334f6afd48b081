#!/bin/bash
# Session 15, device run 5: the MoE kernels for one token of dense experts with a warp's next
# chunk of weights in flight while it multiplies the current one (gate_up_pipe_kernel,
# down_pipe_kernel; FRANK_MOE_PIPE, experiment-only: 1 gate_up, 2 down, 3 both). Checks: the MoE op
# check against the CPU reference, and the logits of decode steps (incremental, graphs) byte for
# byte against main's kernels. Then the step, alternating, 3 rounds, and ncu of the MoE kernels.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
M=build-exp/M
FRANK_MOE_PIPE=3 timeout 200 $M/frank_cuda_ops_check --only moe > $OUT/ops-moe-pipe.log 2>&1; echo "ops_check moe (pipe) rc=$? $(grep -c PASS $OUT/ops-moe-pipe.log) PASS $(grep -c FAIL $OUT/ops-moe-pipe.log) FAIL"
grep FAIL $OUT/ops-moe-pipe.log | head -5
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    $M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    FRANK_MOE_PIPE=3 $M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    echo "logits $mode $w: main vs pipe $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER) ($(stat -c %s /tmp/a.bin) bytes)"
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $M/frank $cmd "${EXTRA[@]}" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm main X=0
  arm pipe3 FRANK_MOE_PIPE=3
  arm pipe1 FRANK_MOE_PIPE=1
  arm pipe2 FRANK_MOE_PIPE=2
done
cp /tmp/main.log /tmp/pipe3.log $OUT/
EXTRA=(--tokens-per-step 4 --same-experts)
for round in 1 2; do arm main4 X=0; arm pipe4 FRANK_MOE_PIPE=3; done
for v in 0 3; do
  FRANK_MOE_PIPE=$v timeout 200 /usr/local/cuda/bin/ncu --graph-profiling node --cache-control none --clock-control none \
    --kernel-name regex:"gate_up|down" --launch-skip 40 --launch-count 32 --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv \
    $M/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 5 > /tmp/ncu$v.csv 2>/dev/null
  xz -c /tmp/ncu$v.csv > $OUT/ncu-moe-$v.csv.xz
  echo "ncu MOE_PIPE=$v: $(grep -c gpu__time /tmp/ncu$v.csv) kernels"
done
