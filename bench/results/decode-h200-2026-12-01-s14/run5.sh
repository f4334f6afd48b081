#!/bin/bash
# Session 14, device run 5 (run 4: the write-back after each unit pass of the down kernel, no prefetch: 1,098.9-1,102.6 us against 1,088.8-1,092.4 separate): W = main + each site's write-back (hc_post) done by the sublayer's last
# kernel (linear_kernel for o_b_proj, the MoE's last down pass) after its last store, its reads
# asked of the L2 as the kernel starts.
# FRANK_SEPARATE_POST=1 (experiment-only switch) runs the op, then hc_post, as main does.
# The dense and MoE op checks (bit identity of the write-back), the decode step alternating, the
# forward tests.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
W=build-exp/W
for f in dense moe; do
  timeout 200 $W/frank_cuda_ops_check --only $f > $OUT/ops-$f.log 2>&1; echo "ops_check $f rc=$? $(grep -c PASS $OUT/ops-$f.log) PASS $(grep -c FAIL $OUT/ops-$f.log) FAIL; write-back cases: $(grep -c 'PASS.*write-back' $OUT/ops-$f.log) PASS"
  grep FAIL $OUT/ops-$f.log | head -5
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  FRANK_SEPARATE_POST=1 $W/frank $cmd > /tmp/u.log 2>&1; echo "round $round separate: $(grep '^| step' /tmp/u.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/u.log)"
  $W/frank $cmd > /tmp/f.log 2>&1; echo "round $round in-kernel: $(grep '^| step' /tmp/f.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/f.log)"
done
cp /tmp/u.log $OUT/bench-separate.log; cp /tmp/f.log $OUT/bench-in-kernel.log
timeout 250 $W/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -6
