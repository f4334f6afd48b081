#!/bin/bash
# Session 19, device run 5. M = main d14c18d. W = the window ring's store done by attend's merge
# kernel (cuda::RingStore; the op `window_store` of V4 layers gone: CudaOps/CpuOps::attend store
# the chunk's rows), one launch fewer a layer. Logits byte for byte against M (fp32, bf16 and fp8
# K=V records; bf16 and fp32 weights; incremental and chunked); W's attention op checks (the ring
# compared bit for bit after every chunk) and CUDA tests; the step alternating M, W over 4 rounds;
# the 4-token verify step (same experts) of both.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    for kv in fp32 bf16 fp8; do
      build-exp/M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --kv-dtype $kv --ids $ids --mode $mode --out /tmp/M.bin > /dev/null 2>&1
      build-exp/W/frank logits --synthetic tiny --backend cuda --weights-dtype $w --kv-dtype $kv --ids $ids --mode $mode --out /tmp/W.bin > /dev/null 2>&1
      echo "logits $mode $w kv $kv: M vs W $(cmp -s /tmp/M.bin /tmp/W.bin && echo identical || echo DIFFER) ($(stat -c %s /tmp/W.bin) bytes)"
    done
  done
done
build-exp/W/frank_cuda_ops_check --only attention > /tmp/ops_attention.log 2>&1; echo "ops_check attention rc=$? $(grep -c PASS /tmp/ops_attention.log) PASS $(grep -c FAIL /tmp/ops_attention.log) FAIL"
build-exp/W/frank_cuda_tests --gtest_filter=-CudaHybrid.TheCommandLineRefusesABadPlanAtStart > /tmp/cuda_tests.log 2>&1; echo "cuda_tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' /tmp/cuda_tests.log | head -3 | tr '\n' ' ')"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, extra args...
  local name=$1 bin=$2; shift 2
  timeout 120 $bin/frank $cmd "$@" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) layers $(grep -E '^\| [0-3] ' /tmp/$name.log | cut -d'|' -f5 | tr -d ' ' | tr '\n' ' ') $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3 4; do
  echo "round $round"
  arm M build-exp/M
  arm W build-exp/W
done
for a in M W; do arm ${a}_t4 build-exp/$a --tokens-per-step 4 --same-experts; done
cp /tmp/*.log $OUT/ 2>/dev/null
