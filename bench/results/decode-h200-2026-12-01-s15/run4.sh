#!/bin/bash
# Session 15, device run 4: the window ring's store (store_rows_kernel, after attend) on the step's
# branch stream instead of between attend and o_a on the main one; hc_post joins the branch.
# FRANK_STORE_APART (experiment-only) switches it on. Alternating, 3 rounds; then the CUDA forward
# and graph tests with it on (a served step's graph: the ring feeds every later step).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
T=build-exp/T
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $T/frank $cmd "${EXTRA[@]}" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm main X=0
  arm store FRANK_STORE_APART=1
  arm store_sink FRANK_STORE_APART=1 FRANK_SINKHORN_APART=2
done
cp /tmp/main.log /tmp/store.log $OUT/
EXTRA=(--tokens-per-step 4 --same-experts)
for round in 1 2; do
  arm main4 X=0
  arm store4 FRANK_STORE_APART=1
done
FRANK_STORE_APART=1 timeout 250 $T/frank_cuda_tests > $OUT/cuda-tests-store.log 2>&1; echo "frank_cuda_tests (store apart) rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests-store.log | tail -6
FRANK_SINKHORN_APART=2 timeout 250 $T/frank_cuda_tests --gtest_filter='CudaGraphs.*:CudaForward.*' > $OUT/cuda-tests-sink.log 2>&1; echo "frank_cuda_tests graphs+forward (sinkhorn apart; CudaModel has no own stream: fused) rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests-sink.log | tail -3
