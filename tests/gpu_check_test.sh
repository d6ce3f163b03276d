#!/usr/bin/env bash
# scripts/gpu-check without a GPU: exactly one line saying so, exit 0. On a GPU machine it
# would run the whole check (minutes): skipped there.
#   tests/gpu_check_test.sh SOURCE_DIR
set -u
if nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: a GPU is here; run scripts/gpu-check itself"
  exit 0
fi
out=$("$1/scripts/gpu-check" 2>&1) || { echo "gpu-check exited non-zero: $out"; exit 1; }
echo "$out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "expected one line"; exit 1; }
[[ $out == *"no NVIDIA GPU"* ]] || { echo "expected it to say there is no GPU"; exit 1; }
