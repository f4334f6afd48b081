#!/bin/bash
# Session-10 device check: the merged V4.1 verify target + DSpark on CUDA, and the 2-row bf16 linear.
cd "$(dirname "$0")/.."
tar -xJf .gpu/build-device.tar.xz
bin=build-device
export LD_LIBRARY_PATH=$bin
o=$OUT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $o/gpu.txt
date -u >> $o/gpu.txt
for only in dense v41 attention; do timeout 300 $bin/frank_cuda_ops_check --only $only > $o/ops-$only.log 2>&1; echo "ops $only rc=$? $(grep -cE '^FAIL' $o/ops-$only.log) FAIL lines, $(grep -cE '^(ok|pass|PASS)' $o/ops-$only.log) ok"; done
timeout 400 $bin/frank_cuda_tests > $o/forward.log 2>&1; echo "frank_cuda_tests rc=$?"; grep -E "PASSED|FAILED|SKIPPED \]" $o/forward.log | tail -15
source <(sed -n '/^generate_speculative() {/,/^}/p' scripts/gpu-check)
generate_speculative $bin/frank --model tests/fixtures/dsv4-mtp/tiny-v4-mtp > $o/gen-v4.log 2>&1; echo "gen v4 rc=$?"; cat $o/gen-v4.log
generate_speculative $bin/frank --model tests/fixtures/dsv41-dspark/tiny-v41-dspark --engram-data tests/fixtures/dsv41/tiny-v41-native/reference.safetensors > $o/gen-v41.log 2>&1; echo "gen v41 rc=$?"; cat $o/gen-v41.log
