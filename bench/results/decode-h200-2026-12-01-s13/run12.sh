#!/bin/bash
# Session 13, device run 12: the served graph's structure with and without CapturedMemory (run 10's
# patch; FRANK_NO_CAPMEM=1 turns it off, as main), listed by an experiment-only switch: node
# types (0 kernel, 10 alloc, 11 free), edges (type 0 ordinary, 1 programmatic), and for each
# kernel the set of its incoming edges (upstream node type, p = programmatic, d = ordinary).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 20"
echo "== main (FRANK_NO_CAPMEM=1)"; FRANK_NO_CAPMEM=1 FRANK_GRAPH_STATS=1 build-exp/S2/frank $cmd > $OUT/stats-main.log 2>&1; grep -E "^node|^edge|^kernel|^\| step" $OUT/stats-main.log
echo "== CapturedMemory"; FRANK_GRAPH_STATS=1 build-exp/S2/frank $cmd > $OUT/stats-capmem.log 2>&1; grep -E "^node|^edge|^kernel|^\| step" $OUT/stats-capmem.log
