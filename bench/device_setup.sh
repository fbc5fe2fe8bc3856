# Sourced by the bench/*_session.sh scripts on the device machine, from the repository
# root with the MLIR tarball carried (`carry: [".device"]`, shared/device/README.md):
# unpacks the MLIR bindings once, installs tileir without dependencies, sets `out`
# ($OUT, made), and records the GPU, its clocks and the date in $out/device.txt.
out=${OUT:-/tmp/tileir-out}
mkdir -p "$out"
if [ ! -d /tmp/site/mlir ]; then
  mkdir -p /tmp/site && tar xJf .device/mlir-cp312.tar.xz -C /tmp/site || exit 1
fi
export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1 TILEIR_CACHE_DIR=/tmp/tileir-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$out/pip.log" 2>&1 || {
  cat "$out/pip.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader \
  | tee "$out/device.txt"
date -u | tee -a "$out/device.txt"
