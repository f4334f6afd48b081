#!/bin/bash
# Session 15, device run 8 (after runs 6-7 traced a site kernel): the finishing block's collapsing
# warps, idle while the mixing warps gather the partial sums, load their token's streams then
# (HeldStreams), so the collapse no longer waits a round trip for them after the gather; and
# Sinkhorn beside the sublayer (run 3's split), since with the collapse shorter the mix becomes the
# longest path. Experiment-only switches: FRANK_NO_HOLD (the collapse loads after the gather, as
# main), FRANK_SINKHORN_APART (Sinkhorn on a stream of its own). Checks: the dense op check (with
# the split's bit identity), the CUDA tests, logits byte for byte with and without the hold.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
H=build-exp/H
timeout 200 $H/frank_cuda_ops_check --only dense > $OUT/ops-dense.log 2>&1; echo "ops_check dense rc=$? $(grep -c PASS $OUT/ops-dense.log) PASS $(grep -c FAIL $OUT/ops-dense.log) FAIL; split bit-identity: $(grep -c 'PASS.*hc_pre_logits' $OUT/ops-dense.log) PASS"
grep FAIL $OUT/ops-dense.log | head -5
FRANK_NO_HOLD=1 timeout 200 $H/frank_cuda_ops_check --only dense > /tmp/ops-nohold.log 2>&1; echo "ops_check dense (no hold) rc=$? $(grep -c PASS /tmp/ops-nohold.log) PASS $(grep -c FAIL /tmp/ops-nohold.log) FAIL"
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7 full; do
  for w in bf16 fp32; do
    FRANK_NO_HOLD=1 $H/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/a.bin > /dev/null 2>&1
    $H/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/b.bin > /dev/null 2>&1
    echo "logits $mode $w: no hold vs hold $(cmp -s /tmp/a.bin /tmp/b.bin && echo identical || echo DIFFER) ($(stat -c %s /tmp/a.bin) bytes)"
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, env...
  local name=$1; shift
  env "$@" timeout 120 $H/frank $cmd "${EXTRA[@]}" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log)"
}
for round in 1 2 3; do
  echo "round $round"
  arm nohold FRANK_NO_HOLD=1
  arm hold X=0
  arm hold_apart FRANK_SINKHORN_APART=1
  arm nohold_apart FRANK_NO_HOLD=1 FRANK_SINKHORN_APART=1
done
cp /tmp/nohold.log /tmp/hold.log /tmp/hold_apart.log $OUT/
EXTRA=(--tokens-per-step 4 --same-experts)
for round in 1 2; do arm nohold4 FRANK_NO_HOLD=1; arm hold4 X=0; arm hold_apart4 FRANK_SINKHORN_APART=1; done
timeout 280 $H/frank_cuda_tests > $OUT/cuda-tests.log 2>&1; echo "frank_cuda_tests (hold) rc=$?"; grep -E "FAILED|PASSED" $OUT/cuda-tests.log | tail -4
