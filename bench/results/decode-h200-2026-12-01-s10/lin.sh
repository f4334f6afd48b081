#!/bin/bash
cd "$(dirname "$0")/.."
mkdir -p /tmp/x && tar -xJf build-exp/lin.tar.xz -C /tmp/x
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
for round in 1 2; do
for v in main u4 tw8k r2 nohint u4tw8k; do
  timeout 120 /tmp/x/lin/lin_$v > $OUT/lin_${v}_$round.md 2>&1
  echo "== $v round $round"; grep -E "read bandwidth|x4096 \| bf16 \| 1 \||4096x1024 \| bf16|fp8/128 \| 1 \|" $OUT/lin_${v}_$round.md | head -12
done
done
