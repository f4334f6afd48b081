#!/bin/bash
cd "$(dirname "$0")/.."
[[ -d build-device ]] || tar -xJf .gpu/build-device.tar.xz
bin=build-device
export LD_LIBRARY_PATH=$bin
o=$OUT
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in memcheck racecheck; do
  timeout 200 $san --tool $tool --error-exitcode 3 $bin/frank_cuda_tests --gtest_filter='CudaDSpark*:CudaV41SpecRewind.Rewinding*:CudaV41SpecRewind.Refuses*:CudaV41SpecFeatures.*' > $o/$tool-v41-spec.log 2>&1
  echo "$tool rc=$? $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $o/$tool-v41-spec.log)"
done
for t in 1 2 3 4 5; do
  $bin/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --tokens-per-step $t --same-experts --steps 50 > $o/bench-verify-$t.log 2>&1
  echo "T=$t $(grep '^| step' $o/bench-verify-$t.log)"
done
$bin/frank bench decode --synthetic v4-flash --layers 4 --ctx 32768 --per-op > $o/bench-decode.log 2>&1
echo "T=1 per-op run $(grep '^| step' $o/bench-decode.log)"
