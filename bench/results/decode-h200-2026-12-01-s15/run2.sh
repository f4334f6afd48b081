#!/bin/bash
# Session 15, device run 2: where the served graph's time goes, kernel by kernel (main's code, the
# prefetch switch off). nsys traces graph nodes with their real overlap (programmatic launch
# included); ncu gives each kernel alone (serialised, caches not flushed).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
P=build-exp/P
ls -d /usr/local/cuda*/bin 2>/dev/null; which nsys ncu compute-sanitizer 2>&1
NSYS=$(which nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems*/bin/nsys 2>/dev/null | head -1)
NCU=$(which ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute*/ncu 2>/dev/null | head -1)
echo "nsys=$NSYS ncu=$NCU"
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 20"
if [ -n "$NSYS" ]; then
  timeout 240 $NSYS profile --cuda-graph-trace=node -t cuda -o /tmp/prof $P/frank $cmd > /tmp/nsys.log 2>&1; echo "nsys rc=$?"
  tail -3 /tmp/nsys.log
  timeout 120 $NSYS stats --report cuda_gpu_trace --format csv -o /tmp/trace /tmp/prof.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
  ls /tmp/trace* && xz -T4 -c /tmp/trace*.csv > $OUT/trace.csv.xz
fi
if [ -n "$NCU" ]; then
  timeout 240 $NCU --graph-profiling node --cache-control none --clock-control none --kernel-name regex:"linear|site|post|moe|gate|down|route|attend|norm|rope|indexer|topk|compress|window|embed|scale|head|collapse|store|expert|select|add"  --launch-skip 190 --launch-count 200 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread \
    --csv $P/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 5 > /tmp/ncu.csv 2>/tmp/ncu.err; echo "ncu rc=$?"
  tail -3 /tmp/ncu.err; xz -c /tmp/ncu.csv > $OUT/ncu.csv.xz
fi
