#!/bin/bash
# Session 13, device run 10: C = main (f4bd511) + CapturedMemory: a captured step's arrays are
# allocated at the graph's start and freed at its end (run 9: 81 allocation and 81 free nodes stood
# between the step's 94 kernels). Tests first (the graph tests: replays bit-identical to eager
# steps), then the decode step alternating with B (main), then verify steps, then memcheck.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
C=build-exp/C
timeout 300 $C/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED|SKIPPED" $OUT/cuda-tests.log | tail -5
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in B C; do
    build-exp/$v/frank $cmd > $OUT/dec-$v-$round.log 2>&1; echo "round $round $v: $(grep '^| step' $OUT/dec-$v-$round.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' $OUT/dec-$v-$round.log) | marked $(grep -o 'which took [0-9.]* us' $OUT/dec-$v-$round.log)"
  done
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-C-3.log
rm -f $OUT/dec-*-1.log $OUT/dec-*-2.log
for T in 2 4; do
  $C/frank $cmd --tokens-per-step $T --same-experts > $OUT/dec-C-T$T.log 2>&1; echo "C T=$T: $(grep '^| step' $OUT/dec-C-T$T.log | cut -d'|' -f5-6)"
done
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
timeout 240 $san --tool memcheck $C/frank_cuda_tests --gtest_filter='CudaGraphs.*:CudaForward.*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | tail -3
