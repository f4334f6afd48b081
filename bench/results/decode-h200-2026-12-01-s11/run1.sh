#!/bin/bash
# Session 11, device run 1: A = the attention's chains as two graph branches; B = A + the shared
# expert's pass on the branch beside the router and route. Correctness of B first, then the decode
# step of A --one-stream (main before this session), A, B and B --one-stream (the split MoE
# passes in order, no branch), alternating, then B's verify steps.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
o=$OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $o/gpu.txt; date -u >> $o/gpu.txt
B=build-exp/B
timeout 300 $B/frank_cuda_ops_check --only moe > $o/ops-moe.log 2>&1; echo "ops moe rc=$? FAIL lines: $(grep -c FAIL $o/ops-moe.log)"; grep -iE "split" $o/ops-moe.log | head -3
timeout 400 $B/frank_cuda_tests > $o/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED" $o/cuda-tests.log | tail -8
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in A1 A B B1; do
    case $v in A1) bin=build-exp/A/frank; extra="--one-stream";; A) bin=build-exp/A/frank; extra="";; B) bin=$B/frank; extra="";; B1) bin=$B/frank; extra="--one-stream";; esac
    $bin $cmd $extra > $o/dec-$v-$round.log 2>&1
    echo "round $round $v: $(grep '^| step' $o/dec-$v-$round.log) rc=$?"
  done
done
grep -E '^\| [0-9]|^\| head' $o/dec-B-3.log
for t in 2 4; do
  $B/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --tokens-per-step $t --same-experts --steps 50 > $o/verify-$t.log 2>&1
  echo "B T=$t $(grep '^| step' $o/verify-$t.log)"
done
