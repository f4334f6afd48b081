#!/bin/bash
# Session 13, device run 1: S = main + stream_linear (one bf16 token through a weight of >= 16 MB,
# streamed by bulk copies). The dense ops against the CPU (the stream path at q_b, wo_a, wo_b and
# head shapes); then the decode step alternating: FRANK_STREAM_OFF=1 (main's linear_kernel), S
# (copies issued before the wait), FRANK_STREAM_WAIT=1 (the copying warp waits first).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
S=build-exp/S
timeout 200 $S/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
grep -E "bf16 (1x1024->32768|1x8192->4096|8x4096->1024|1x4096->129280|1x1024->8192) n=1 " $OUT/ops-dense.log | head
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  FRANK_STREAM_OFF=1 $S/frank $cmd > $OUT/dec-off-$round.log 2>&1; echo "round $round off:  $(grep '^| step' $OUT/dec-off-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-off-$round.log)"
  $S/frank $cmd > $OUT/dec-S-$round.log 2>&1; echo "round $round S:    $(grep '^| step' $OUT/dec-S-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-S-$round.log)"
  FRANK_STREAM_WAIT=1 $S/frank $cmd > $OUT/dec-wait-$round.log 2>&1; echo "round $round wait: $(grep '^| step' $OUT/dec-wait-$round.log) $(grep -o 'measured now: [0-9]*' $OUT/dec-wait-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-off-3.log $OUT/dec-S-3.log $OUT/dec-wait-3.log
rm -f $OUT/dec-*-1.log $OUT/dec-*-2.log
timeout 150 $S/frank_cuda_tests --gtest_filter='Fixtures/CudaGolden.*:CudaForward.*:CudaGraphs.*' > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -4
