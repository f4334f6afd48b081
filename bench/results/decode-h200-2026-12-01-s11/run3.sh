#!/bin/bash
# Session 11, device run 3: the final code (F). Checks: frank_cuda_ops_check --only moe, all of
# frank_cuda_tests, greedy generate CPU against CUDA (gpu-check's), compute-sanitizer on the small
# forward cases and the graph test; then the decode step against --one-stream (no branch: the
# step before this session), alternating, the verify steps, and one per-op run.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
o=/tmp/s11; mkdir -p $o
F=build-exp/F
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $o/gpu.txt; date -u >> $o/gpu.txt
timeout 300 $F/frank_cuda_ops_check --only moe > $o/ops-moe.log 2>&1; echo "ops moe rc=$? PASS $(grep -c '^PASS' $o/ops-moe.log) FAIL $(grep -c '^FAIL' $o/ops-moe.log)"
timeout 400 $F/frank_cuda_tests > $o/cuda-tests.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED|graphs \]" $o/cuda-tests.log | tail -8
source <(sed -n '/^generate_speculative() {/,/^}/p' scripts/gpu-check)
generate_speculative $F/frank --model tests/fixtures/dsv4-mtp/tiny-v4-mtp > $o/gen-v4.log 2>&1; echo "gen v4 rc=$?"; tail -4 $o/gen-v4.log
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
small_forward='Fixtures/CudaGolden.Fp32*/0:Fixtures/CudaGolden.Fp32*/2:CudaForward.*:CudaGraphs.*'
for tool in memcheck racecheck; do
  timeout 280 $san --tool $tool --error-exitcode 3 $F/frank_cuda_tests --gtest_filter="$small_forward" > $o/$tool-forward.log 2>&1
  echo "$tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$tool-forward.log | sort | uniq -c | tr '\n' ' ')"
done
cmd="bench decode --synthetic v4-flash --layers 4 --ctx 32768 --steps 100"
for round in 1 2 3; do
  for v in one final; do
    extra=""; [[ $v == one ]] && extra="--one-stream"
    $F/frank $cmd $extra > $o/dec-$v-$round.log 2>&1
    echo "round $round $v: $(grep '^| step' $o/dec-$v-$round.log)"
  done
done
grep -E '^\| [0-9]|^\| head' $o/dec-final-3.log
for t in 1 2 3 4 5; do
  $F/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --tokens-per-step $t --same-experts --steps 50 > $o/verify-$t.log 2>&1
  echo "T=$t $(grep '^| step' $o/verify-$t.log)"
done
$F/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --per-op > $o/per-op.log 2>&1
echo "per-op run: $(grep '^| step' $o/per-op.log)"; grep -E "^\| (moe|linear|hc_|attend|index|norm|grouped)" $o/per-op.log | head -12
cp $o/cuda-tests.log $o/dec-final-3.log $o/dec-one-3.log $o/gpu.txt $o/ops-moe.log $o/per-op.log $o/racecheck-forward.log $o/memcheck-forward.log $OUT/
