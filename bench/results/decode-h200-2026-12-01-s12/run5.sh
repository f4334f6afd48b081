#!/bin/bash
# Session 12, device run 5: E = the acq_rel arrival (run 4's mode 2, now the only code) and the mHC
# site's weights (fn's first values, base, scale, the norm weights) asked for before the wait for
# the previous kernel; against run 4's binary A in modes 0 (main) and 2 (the arrival alone),
# alternating. Then E's checks.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
E=build-exp/E
timeout 150 $E/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "E: ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
timeout 100 $E/frank_cuda_ops_check --only v41 > $OUT/ops-v41.log 2>&1; echo "E: ops_check v41 rc=$? $(grep -c PASS $OUT/ops-v41.log) PASS $(grep -c FAIL $OUT/ops-v41.log) FAIL"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  FRANK_ARRIVAL=0 build-exp/A/frank $cmd > $OUT/dec-main-$round.log 2>&1; echo "round $round main: $(grep '^| step' $OUT/dec-main-$round.log)"
  FRANK_ARRIVAL=2 build-exp/A/frank $cmd > $OUT/dec-arrival-$round.log 2>&1; echo "round $round arrival: $(grep '^| step' $OUT/dec-arrival-$round.log)"
  $E/frank $cmd > $OUT/dec-E-$round.log 2>&1; echo "round $round E: $(grep '^| step' $OUT/dec-E-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-E-3.log
for T in 2 4; do
  $E/frank $cmd --tokens-per-step $T --same-experts > $OUT/dec-E-T$T.log 2>&1; echo "E T=$T: $(grep '^| step' $OUT/dec-E-T$T.log)"
done
timeout 240 $E/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -6
