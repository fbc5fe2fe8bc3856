#!/usr/bin/env bash
# One device call's worth of MLA decode work.  `variants` (the default): the MLA GPU
# tests, then `--mla-variants` over every row that is an A/B of the default (the token
# pair off, the RoPE box shared too, the L2 lookahead, the table read after the slot
# wait, merged and unskewed hand-offs), then the key A/B rows again (a run's rows are
# comparable with each other, not with another run's).  `phases`: `--mla-phases` (a
# step against its products alone, the pages from DRAM and from L2, paired and not).
# Run from the repository root on the device machine with the MLIR tarball carried
# (`carry: [".device"]`, see shared/device/README.md); each mode within one call's 10
# minutes on an H200:
#     bash bench/mla_session.sh [variants|phases]     (logs and JSON under $OUT)
set -uo pipefail
source bench/device_setup.sh

mode=${1:-variants}
if [ "$mode" = phases ]; then
  echo "== MLA phases"
  mkdir -p "$out/phases"
  timeout 400 python3 bench/decode_attention.py --only-mla --mla-phases --out "$out/phases" \
    > "$out/phases.log" 2>&1
  grep -vE '^\{' "$out/phases.log" | grep -A4 "MLA phases, batch"
  exit 0
fi

echo "== MLA GPU tests"
timeout 150 python3 -m pytest -q -m gpu -n 4 test/python/test_gpu_decode_attention.py -k mla \
  > "$out/test_mla.log" 2>&1
tail -n1 "$out/test_mla.log"; grep "^FAILED" "$out/test_mla.log" | head

for sel in "default" "(default,no token pair,RoPE shared"; do
  echo "== MLA variants: $sel"
  dir="$out/variants-$(echo "$sel" | tr -c 'a-zA-Z0-9' '_')"
  mkdir -p "$dir"
  timeout 260 python3 bench/decode_attention.py --only-mla --mla-variants \
    --mla-only "$sel" --out "$dir" > "$dir.log" 2>&1
  grep -vE '^\{' "$dir.log" | grep -A12 "MLA variants"
done
