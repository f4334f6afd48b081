#!/bin/bash
cd "$(dirname "$0")/.."
mkdir -p /tmp/w && tar -xJf build-exp/hc.tar.xz -C /tmp/w
export LD_LIBRARY_PATH=/tmp/w/hc
for r in 1 2 3; do for v in main s64 s43; do
  echo "$v r$r $(/tmp/w/hc/frank_$v bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100 2>&1 | grep '^| step')"
done; done
