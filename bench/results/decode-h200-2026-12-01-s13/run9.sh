#!/bin/bash
# Session 13, device run 9: what the served step's graph is made of. G = main + an experiment-only
# listing (FRANK_GRAPH_STATS) of its node types (cudaGraphNodeType: 0 kernel, 10 mem alloc, 11 mem
# free, 6 event record, 7 wait event, 8 memset...) and of its edges: from-type -> to-type, edge
# type (0 default, 1 programmatic) and port.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
FRANK_GRAPH_STATS=1 build-exp/G/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 20 > $OUT/graph-stats.log 2>&1; echo rc=$?
grep -E "^node|^edge|^\| step" $OUT/graph-stats.log
