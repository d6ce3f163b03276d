#!/usr/bin/env bash
# On the lent GPU machine: the Multi30k recipe's variants x seeds judged on val
# (bench/recipe/variants.sh), side by side, for issue 26's choices.
#
#   bench/gpu/recipe_variants_gpu.sh PAYLOAD DATA_DIR OUT_DIR NAME="FLAGS" [NAME="FLAGS" ...]
#
# Here first: bench/gpu/pack.sh. The device call: carry .devcarry, run this with $OUT, e.g.
# SEEDS="1 2" JOBS=8 bench/gpu/recipe_variants_gpu.sh .devcarry/payload.tar.xz .devcarry/data
# $OUT base="" h8="--heads 8" v6k="--dim-vocabs 6000" enc4="--enc-layers 4". Each run learns
# its own vocabulary (as run.sh does). VARIANT_SECONDS (default 420) stops the whole sweep;
# OUT_DIR gets summary.txt (each run's val BLEU, each variant's mean) and logs.tgz.
# DEVICE=cpu runs it here as a smoke test, with build/ as it is.
set -u
# shellcheck disable=SC2034  # payload: read by device_setup.sh
payload="$1" data="$2" out="$3"
shift 3
root="$PWD"
data="$(cd "$data" && pwd)"
device="${DEVICE:-cuda}"
source "$(dirname "$0")/device_setup.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/summary.txt" 2>/dev/null
export OMP_WAIT_POLICY=passive
cd "$root" || exit 1
rm -rf /tmp/variants  # a second call on a warm machine: its own summary, its own means
TX_BIN=/work/main/build/apps TRAIN_FLAGS="--cpu-threads 2 ${TRAIN_FLAGS:-}" JOBS="${JOBS:-8}" \
  timeout -k 5 "${VARIANT_SECONDS:-420}" bench/recipe/variants.sh "$data" - /tmp/variants "$device" "$@"
echo "variants.sh exit $? (124: stopped at VARIANT_SECONDS)" >> /tmp/variants/summary.txt
cat /tmp/variants/summary.txt >> "$out/summary.txt"
tar czf "$out/logs.tgz" -C /tmp/variants --exclude '*.safetensors' --exclude '*.de' .
cat "$out/summary.txt"
