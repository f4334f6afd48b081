#!/bin/bash
cd "$(dirname "$0")/.."
mkdir -p /tmp/y && tar -xJf build-exp/lin2.tar.xz -C /tmp/y
for round in 1 2; do
for v in r2 r4 r1 r2u4 r2tw2k; do
  timeout 100 /tmp/y/lin2/lin_$v > $OUT/lin2_${v}_$round.md 2>&1
done
done
for v in r2 r4 r1 r2u4 r2tw2k; do for round in 1 2; do
  echo "$v r$round $(grep -E '^# cuda::linear by' $OUT/lin2_${v}_$round.md | grep -oE '[0-9]+ GB/s') | $(grep -E '\| bf16 \| 1 \|' $OUT/lin2_${v}_$round.md | awk -F'|' '{printf "%s:%s ", $2, $5}')"
done; done
