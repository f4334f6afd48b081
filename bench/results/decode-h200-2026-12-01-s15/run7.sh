#!/bin/bash
# Session 15, device run 7 (run 6 plus trace points inside the gather and the collapse): where a site kernel's time goes. site_kernel writes %globaltimer at
# points of its launch into a ring of 64 (experiment-only instrumentation); the benchmark prints the
# ring after its replays (the last 64 site launches: served and marked graphs alternate).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
R=build-exp/R
$R/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100 > $OUT/trace.log 2>&1
grep '^| step' $OUT/trace.log
grep -A65 'site trace' $OUT/trace.log | head -40
