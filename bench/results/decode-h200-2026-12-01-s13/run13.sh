#!/bin/bash
# Session 13, device run 13: what the 8 hc_post launches of a step cost on its critical path, as
# an upper bound for fusing hc_post into the sublayers' last kernels: an experiment-only switch
# (FRANK_ABLATE_POST=1) skips them (results wrong, timing only). A = main + that switch.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  build-exp/A/frank $cmd > /tmp/d.log 2>&1; echo "round $round main:       $(grep '^| step' /tmp/d.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/d.log)"
  FRANK_ABLATE_POST=1 build-exp/A/frank $cmd > /tmp/d.log 2>&1; echo "round $round posts off:  $(grep '^| step' /tmp/d.log | cut -d'|' -f5-6) $(grep -o 'measured now: [0-9]*' /tmp/d.log)"
done
