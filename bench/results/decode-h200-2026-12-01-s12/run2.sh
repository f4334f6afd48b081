#!/bin/bash
# Session 12, device run 2: hc_post fused into the next mHC site (F: hc_post_pre / hc_post_head),
# against main (P with FRANK_PREFETCH_MB=0: run 1's binary with its prefetch off), alternating; then
# F's checks.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
F=build-exp/F
timeout 150 $F/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
grep -E "FAIL|hc_post_(pre|head)" $OUT/ops-dense.log | head -30
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  FRANK_PREFETCH_MB=0 build-exp/P/frank $cmd > $OUT/dec-main-$round.log 2>&1; echo "round $round main: $(grep '^| step' $OUT/dec-main-$round.log)"
  $F/frank $cmd > $OUT/dec-fused-$round.log 2>&1; echo "round $round fused: $(grep '^| step' $OUT/dec-fused-$round.log)"
done
grep -E '^\| [0-9]|^\| head' $OUT/dec-main-3.log $OUT/dec-fused-3.log
for T in 2 4; do
  $F/frank $cmd --tokens-per-step $T --same-experts > $OUT/dec-fused-T$T.log 2>&1; echo "fused T=$T: $(grep '^| step' $OUT/dec-fused-T$T.log)"
done
timeout 240 $F/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -6
