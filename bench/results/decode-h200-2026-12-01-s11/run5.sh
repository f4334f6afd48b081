#!/bin/bash
# Session 11, device run 5: attend's splits merged by their last block (G) against a second merge
# kernel (F, the code of run 4): the attention ops against the CPU, the CUDA tests, and the decode
# step, alternating.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
o=/tmp/s11; mkdir -p $o
G=build-exp/G
timeout 120 $G/frank_cuda_ops_check --only attention > $o/ops-attention.log 2>&1; echo "ops attention rc=$? PASS $(grep -c '^PASS' $o/ops-attention.log) FAIL $(grep -c '^FAIL' $o/ops-attention.log)"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in F G; do
    build-exp/$v/frank $cmd > $o/dec-$v-$round.log 2>&1
    echo "round $round $v: $(grep '^| step' $o/dec-$v-$round.log)"
  done
done
grep -E '^\| [0-9]|^\| head' $o/dec-G-3.log
timeout 200 $G/frank_cuda_tests > $o/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED" $o/cuda-tests.log | tail -4
cp $o/ops-attention.log $o/dec-F-3.log $o/dec-G-3.log $o/cuda-tests.log $OUT/
