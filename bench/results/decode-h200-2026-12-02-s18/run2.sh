#!/bin/bash
# Session 18, device run 2: the indexer scores kernel on more, smaller blocks, or with its inner
# loop unrolled (experiments/indexer-variants.patch; only indexer.cu differs from main 2f3a532).
# M = main; X32 = 32 keys a block (256 blocks at ctx 32K, two a multiprocessor:
# __launch_bounds__(256, 2), inner loop unrolled by 2); U64 = main's 64 keys a block with the inner
# loop unrolled by 32. Both keep each key's sums in main's order (bit-identical by construction).
# Each arm's attention op check (it holds the indexer cases); logits byte for byte against M; the
# step alternating the arms, 3 rounds.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
arms="X32 U64"
for a in $arms; do
  [ -x build-exp/$a/frank_cuda_ops_check ] && timeout 100 build-exp/$a/frank_cuda_ops_check --only attention > $OUT/ops-$a.log 2>&1
  echo "ops_check attention $a rc=$? $(grep -c PASS $OUT/ops-$a.log) PASS $(grep -c FAIL $OUT/ops-$a.log) FAIL"
done
ids=$(seq -s, 1 3 90)
for mode in incremental chunked:7; do
  for w in bf16 fp32; do
    build-exp/M/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/M.bin > /dev/null 2>&1
    for a in $arms; do
      build-exp/$a/frank logits --synthetic tiny --backend cuda --weights-dtype $w --ids $ids --mode $mode --out /tmp/$a.bin > /dev/null 2>&1
      echo "logits $mode $w: M vs $a $(cmp -s /tmp/M.bin /tmp/$a.bin && echo identical || echo DIFFER)"
    done
  done
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
arm() {  # name, binary dir, extra args...
  local name=$1 bin=$2; shift 2
  timeout 120 $bin/frank $cmd "$@" > /tmp/$name.log 2>&1
  echo "$name: $(grep '^| step' /tmp/$name.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/$name.log) layers $(grep -E '^\| [0-3] ' /tmp/$name.log | cut -d'|' -f5 | tr -d ' ' | tr '\n' ' ') $(grep -i error /tmp/$name.log | head -1)"
}
for round in 1 2 3; do
  echo "round $round"
  arm M build-exp/M
  for a in $arms; do arm $a build-exp/$a; done
done
cp /tmp/*.log $OUT/ 2>/dev/null
