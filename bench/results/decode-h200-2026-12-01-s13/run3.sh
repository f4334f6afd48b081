#!/bin/bash
# Session 13, device run 3: stream_linear with four partial sums a lane (run 2: one chain of 64
# FMAs), and, to see whether the copies or the computing warps set its pace, a diagnostic switch
# that skips the computation (FRANK_STREAM_NOCOMPUTE: wrong results, timing only).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
S=build-exp/S
timeout 200 $S/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
FRANK_STREAM_OFF=1 $S/frank $cmd > $OUT/dec-off.log 2>&1; echo "off:   $(grep '^| step' $OUT/dec-off.log)"
$S/frank $cmd > $OUT/dec-S.log 2>&1; echo "S:     $(grep '^| step' $OUT/dec-S.log)"
FRANK_STREAM_NOCOMPUTE=1 $S/frank $cmd > $OUT/dec-nc.log 2>&1; echo "nocompute: $(grep '^| step' $OUT/dec-nc.log)"
grep -E '^\| head' $OUT/dec-off.log $OUT/dec-S.log $OUT/dec-nc.log
