#!/usr/bin/env bash
# Checks and times the CUDA top-k kernels on a GPU machine, in one go:
#   1. frank_topk_check: every kernel version against the CPU reference (exit 1 on a mismatch);
#   2. the benchmark (frank_topk_check --bench);
#   3. compute-sanitizer memcheck and racecheck on the small cases, if compute-sanitizer is there.
# Logs go to $OUT (default .gpu/out); a short summary is printed last.
#
# The GPU machine has no build dependencies, so the binary is built on the dev machine and carried:
#   scripts/gpu-topk-check.sh --stage    # here: build with FRANK_CUDA=ON, copy the binary to .gpu/
#   scripts/gpu-topk-check.sh            # there (device tool: carry .gpu), from the repository root
set -uo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--stage" ]]; then
  set -e
  build=${2:-build-cuda}
  cmake -S . -B "$build" -DFRANK_CUDA=ON -DFRANK_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" --target frank_topk_check -j 2
  mkdir -p .gpu
  cp "$build/src/frank/cuda/frank_topk_check" .gpu/
  ldd .gpu/frank_topk_check
  exit 0
fi

bin=.gpu/frank_topk_check
out=${OUT:-.gpu/out}
mkdir -p "$out"
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  ldd "$bin"
} >"$out/gpu.txt" 2>&1

timeout 150 "$bin" >"$out/check.log" 2>&1 || status=1
# SM and memory clocks once a second while the benchmark runs (clocks are left as found).
nvidia-smi dmon -s uc -d 1 >"$out/dmon.log" 2>&1 &
dmon=$!
timeout 80 "$bin" --bench >"$out/bench.log" 2>&1 || status=1
kill "$dmon" 2>/dev/null

san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [[ -n "$san" ]]; then
  for tool in memcheck racecheck; do
    echo "== $tool" >>"$out/sanitizer.log"
    timeout 60 "$san" --tool "$tool" --error-exitcode 3 "$bin" --small >>"$out/sanitizer.log" 2>&1 || status=1
  done
else
  echo "compute-sanitizer: not found on this machine" >"$out/sanitizer.log"
fi

echo "== gpu"; cat "$out/gpu.txt"
echo "== check"; grep -E "^(FAIL|PASS|group|edge|real|random|small)" "$out/check.log" | tail -30
echo "== sanitizer"; grep -E "^==|ERROR SUMMARY|not found|PASS|FAIL" "$out/sanitizer.log"
echo "== bench"; sed -n '/^cold (HBM)/,$p' "$out/bench.log"
echo "exit status $status"
exit $status
