#!/bin/bash
# Session 11, device run 4: compute-sanitizer racecheck and memcheck on the small forward cases,
# which fork onto the branch in every call (eager and captured), with the final code.
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
F=build-exp/F
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
filter='Fixtures/CudaGolden.Fp32*/0:Fixtures/CudaGolden.Fp32*/2:CudaForward.*:CudaRewind.Re*'
for tool in racecheck memcheck; do
  timeout 270 $san --tool $tool --error-exitcode 3 $F/frank_cuda_tests --gtest_filter="$filter" > $OUT/$tool-branch.log 2>&1
  echo "$tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool-branch.log | sort | uniq -c | tr '\n' ' ')"
  grep -E "^\[  (PASSED|FAILED)" $OUT/$tool-branch.log
done
timeout 60 $F/frank_cuda_ops_check --only moe > $OUT/ops-moe.log 2>&1; echo "ops moe rc=$? PASS $(grep -c '^PASS' $OUT/ops-moe.log) FAIL $(grep -c '^FAIL' $OUT/ops-moe.log)"
