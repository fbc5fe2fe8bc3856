#!/usr/bin/env bash
# One device call's worth of GPU work for the tensor-core path: the GPU tests, the
# GEMM tests under compute-sanitizer, the GEMM benchmark, the memory-bound
# benchmark as a regression check.  Run from the repository root on the device
# machine with the MLIR tarball carried (`carry: [".device"]`, see
# shared/device/README.md):
#     bash bench/gpu_session.sh [quick|full]          (logs and JSON under $OUT)
set -uo pipefail
mode=${1:-quick}
source bench/device_setup.sh

echo "== GPU tests"
python3 -m pytest -q -m gpu test/python/test_gpu_gemm.py -x 2>&1 | tee "$out/test_gpu_gemm.log" \
  | tail -15
python3 -m pytest -q -m gpu test/python/test_gpu.py 2>&1 | tee "$out/test_gpu.log" | tail -3

echo "== compute-sanitizer (memcheck, racecheck) on a GEMM of each path"
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 9 python3 -m pytest -q -m gpu \
    test/python/test_gpu_gemm.py -k "fused or attention or unaligned or sm80 or batched" \
    > "$out/sanitizer-$tool.log" 2>&1
  echo "$tool: exit $? ($(grep -c 'ERROR SUMMARY: 0 errors' "$out/sanitizer-$tool.log") clean runs)"
  tail -3 "$out/sanitizer-$tool.log"
done

echo "== GEMM benchmark ($mode)"
if [ "$mode" = quick ]; then
  python3 bench/gemm.py --out "$out" --quick 2>&1 | tee "$out/gemm.log" | tail -40
else
  python3 bench/gemm.py --out "$out" 2>&1 | tee "$out/gemm.log" | tail -60
  python3 bench/memory_bound.py --out "$out" --shapes 16384x8192 2>&1 \
    | tee "$out/memory_bound.log" | tail -12
fi
