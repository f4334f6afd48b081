#!/bin/bash
cd "$(dirname "$0")/.."
mkdir -p /tmp/z && tar -xJf build-exp/moe.tar.xz -C /tmp/z
export LD_LIBRARY_PATH=/tmp/z/moe
for r in 1 2 3; do for v in main g2 d4 g8; do
  echo "$v r$r $(/tmp/z/moe/frank_$v bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100 2>&1 | grep '^| step')"
done; done
