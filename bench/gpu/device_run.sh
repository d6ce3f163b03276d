#!/usr/bin/env bash
# On the lent GPU machine: unpack what was built here and run scripts/gpu-check.
#
#   bench/gpu/device_run.sh PAYLOAD DATA_DIR OUT_DIR [VOCAB]
#
# OUT_DIR gets gpu-check's summary and its logs as one archive (the device tool returns at most
# 8 files), also when gpu-check is stopped at CHECK_SECONDS (default 420).
set -u
payload="$1" data="$2" out="$3" vocab="${4:-}"
root="$PWD"
data="$(cd "$data" && pwd)"
[ -z "$vocab" ] || vocab="$(cd "$(dirname "$vocab")" && pwd)/$(basename "$vocab")"
source "$(dirname "$0")/device_setup.sh"
cd /work/main
TX_BUILD_DIR=/work/main/build DATA="$data" VOCAB="$vocab" LIMIT_SCALE="${LIMIT_SCALE:-1}" \
  timeout -k 5 "${CHECK_SECONDS:-420}" scripts/gpu-check /tmp/gpu-check
cp /tmp/gpu-check/summary.txt "$out/"
tar czf "$out/logs.tgz" -C /tmp/gpu-check --exclude '*.safetensors' --exclude 'tr.*' \
  --exclude test10k.en .
