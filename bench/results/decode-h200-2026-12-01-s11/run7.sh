#!/bin/bash
# Session 11, device run 7: after the review's refactor (CudaModel::step_ops, moe_forward's one
# moe_experts call again): all of frank_cuda_tests, and the decode step once each way.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
R=build-exp/R
timeout 200 $R/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED" $OUT/cuda-tests.log | tail -4
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
$R/frank $cmd > $OUT/dec-final.log 2>&1; echo "final: $(grep '^| step' $OUT/dec-final.log)"
$R/frank $cmd --one-stream > $OUT/dec-one.log 2>&1; echo "one-stream: $(grep '^| step' $OUT/dec-one.log)"
