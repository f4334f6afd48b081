#!/bin/bash
# Session 19, device run 7: compute-sanitizer memcheck and racecheck on small forward cases of the
# CUDA tests built from bf951a9's code (the merge kernel now stores the window ring's rows).
cd "$(dirname "$0")/../../.."
tar -xJf .gpu/exp.tar.xz
export LD_LIBRARY_PATH=$PWD/build-exp/lib
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
filter='Fixtures/CudaGolden.Fp32*/0:CudaForward.*:CudaRewind.Re*'
for tool in memcheck racecheck; do
  timeout 150 "$san" --tool $tool --error-exitcode 3 build-exp/F/frank_cuda_tests --gtest_filter="$filter" > /tmp/$tool.log 2>&1
  echo "$tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' /tmp/$tool.log | tr '\n' ' ')"
done
cp /tmp/memcheck.log /tmp/racecheck.log $OUT/ 2>/dev/null
