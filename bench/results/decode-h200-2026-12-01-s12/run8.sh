#!/bin/bash
# Session 12, device run 8: N = E (main) + the weights of rms_norm, rms_norm_rope (and its RoPE
# frequencies) and route's bias asked for before their wait for the previous kernel; against E,
# alternating. Then N's checks.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
N=build-exp/N
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/E/frank $cmd > $OUT/dec-E-$round.log 2>&1; echo "round $round E: $(grep '^| step' $OUT/dec-E-$round.log)"
  $N/frank $cmd > $OUT/dec-N-$round.log 2>&1; echo "round $round N: $(grep '^| step' $OUT/dec-N-$round.log)"
done
grep -h "measured now" $OUT/dec-N-*.log
grep -E '^\| [0-9]|^\| head' $OUT/dec-N-3.log
for T in 2 4; do
  $N/frank $cmd --tokens-per-step $T --same-experts > $OUT/dec-N-T$T.log 2>&1; echo "N T=$T: $(grep '^| step' $OUT/dec-N-T$T.log)"
done
for only in dense moe; do
  timeout 150 $N/frank_cuda_ops_check --only $only > $OUT/ops-$only.log 2>&1; echo "ops_check $only rc=$? $(grep -c PASS $OUT/ops-$only.log) PASS $(grep -c FAIL $OUT/ops-$only.log) FAIL"
done
timeout 240 $N/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -6
