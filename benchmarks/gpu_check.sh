#!/usr/bin/env bash
# GPU check for the Triton kernels (issue #8): kernel tests on CUDA, then one table of measurements.
#
# Usage (repository root, on a machine with an NVIDIA GPU):   bash benchmarks/gpu_check.sh
# Needs: python with a CUDA build of torch, triton (comes with torch on Linux), numpy; pytest for the tests.
# Nothing is downloaded. If a package is missing, put its wheel in shared/wheels/ (or $WHEELS) and it is installed
# from there with --no-index: pytest (+ iniconfig, packaging, pluggy), numpy. torch/triton are too large to carry
# and must already be on the machine.
# Budget: about 3-4 minutes on an H200 (kernel compiles ~1-2 min, measurements ~1-2 min); hard caps 200 s (tests)
# + 330 s (measurements), so one device call with a 600 s limit always returns.  Sections can be skipped with
# `bash benchmarks/gpu_check.sh --skip 1.5b,kv` (arguments go to gpu_bench.py).
# Results: the table on stdout; copies in $OUT (gpu_bench.json, kernel_tests.txt) when $OUT is set.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$(mktemp -d)}"
WHEELS="${WHEELS:-shared/wheels}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET  # compiled kernels on the GPU, never the interpreter

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3 python3.12 python3.11 python; do
    if command -v "$cand" >/dev/null && "$cand" -c "import torch" 2>/dev/null; then PY="$cand"; break; fi
  done
fi
[ -n "$PY" ] || { echo "gpu_check: no python with torch found; torch (CUDA build) must be preinstalled"; exit 2; }
echo "== python: $($PY -c 'import sys; print(sys.executable, sys.version.split()[0])')"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null || true

need=()
for mod in triton numpy pytest; do
  "$PY" -c "import $mod" 2>/dev/null || need+=("$mod")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "== missing: ${need[*]}; trying wheels in $WHEELS"
  if [ -d "$WHEELS" ]; then
    "$PY" -m pip install -q --no-index --find-links "$WHEELS" "${need[@]}" || echo "gpu_check: wheel install failed"
  fi
fi
"$PY" - <<'PYEOF' || exit 2
import torch, triton
assert torch.cuda.is_available(), "torch sees no CUDA device"
print(f"== torch {torch.__version__} (cuda {torch.version.cuda}), triton {triton.__version__}, {torch.cuda.get_device_name()}")
PYEOF

status=0
if "$PY" -c "import pytest" 2>/dev/null; then
  echo "== kernel tests on CUDA"
  # --noconftest: only the kernel tests' own helpers, so the rest of the project's test deps need not be installed
  # no -x: one failure must not hide the others (the run is too expensive to repeat for each)
  timeout 200 "$PY" -m pytest tests/kernels -q -rfEs -p no:cacheprovider --noconftest -o addopts="" 2>&1 \
    | tee "$OUT/kernel_tests.txt" | tail -25
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu_check: kernel tests FAILED"; status=1; }
else
  echo "gpu_check: pytest unavailable, kernel tests skipped (bring a pytest wheel); gpu_bench still checks correctness"
fi

echo "== measurements"
timeout 330 "$PY" benchmarks/gpu_bench.py --json "$OUT" "$@" || { echo "gpu_check: gpu_bench FAILED"; status=1; }
echo "== results in $OUT"
exit $status
