#!/bin/bash
# Session 12, device run 9: the committed code (main = E) under compute-sanitizer: memcheck and
# racecheck on the small forward cases, and memcheck on the dense ops' checks (the mHC sites).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
E=build-exp/E
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
filter='Fixtures/CudaGolden.Fp32*/0:CudaForward.*'
for tool in memcheck racecheck; do
  timeout 110 $san --tool $tool --error-exitcode 3 $E/frank_cuda_tests --gtest_filter="$filter" > $OUT/$tool-forward.log 2>&1
  echo "$tool forward rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED' $OUT/$tool-forward.log | tr '\n' ' ')"
done
timeout 150 $san --tool memcheck --error-exitcode 3 $E/frank_cuda_ops_check --only dense > $OUT/memcheck-dense.log 2>&1
echo "memcheck ops_check dense rc=$? $(grep -c PASS $OUT/memcheck-dense.log) PASS $(grep -c FAIL $OUT/memcheck-dense.log) FAIL $(grep -h 'ERROR SUMMARY' $OUT/memcheck-dense.log)"
