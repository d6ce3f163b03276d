#!/usr/bin/env bash
# The Multi30k recipe (examples/multi30k/config.json) trained once per variant, each a set of
# tx-train flags on top of the config, and judged on val only: val BLEU (beam 5, sacreBLEU's
# 13a) of the last model and of the average of the last 3 snapshots (what run.sh ships), and
# the last validation cross-entropy. For choosing the recipe's options; test2016 is not read.
#
#   bench/recipe/variants.sh DATA_DIR VOCAB OUT_DIR DEVICE NAME="FLAGS" [NAME="FLAGS" ...]
#
# e.g. variants.sh ../shared/data/multi30k vocab.spm out cuda base="" ema="--exponential-smoothing"
# VOCAB: a joint .spm (the same for every variant, so that only the flags differ).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
data="$1" vocab="$2" out="$3" device="$4"
shift 4
mkdir -p "$out"
for variant in "$@"; do
  name="${variant%%=*}" flags="${variant#*=}"
  dir="$out/$name"
  rm -rf "$dir"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$bin/tx-train" --config "$root/examples/multi30k/config.json" --device "$device" $flags \
    --vocabs "$vocab" "$vocab" --train-sets "$data/train.en" "$data/train.de" \
    --valid-sets "$data/val.en" "$data/val.de" -m "$dir" 2>"$out/$name.log"
  rc=$?
  t1=$(date +%s.%N)
  "$bin/tx-average" --last 3 -m "$dir" -o "$dir/averaged.safetensors" 2>>"$out/$name.log"
  scores=""
  for m in model averaged; do
    "$bin/tx-translate" -m "$dir/$m.safetensors" -v "$vocab" --device "$device" --beam-size 5 \
      --quiet <"$data/val.en" >"$dir/val.$m.de" 2>>"$out/$name.log"
    scores+=" $m $("$bin/tx-score" -r "$data/val.de" --metrics bleu --score-only --quiet \
      <"$dir/val.$m.de" | head -1)"
  done
  echo "$name [$flags]: rc $rc, $(awk "BEGIN{printf \"%.0f\", $t1 - $t0}") s, val BLEU:$scores," \
    "last $(grep 'cross-entropy :' "$out/$name.log" | tail -1 | grep -o 'Up\. [0-9,]* : cross-entropy : [0-9.]*')" \
    | tee -a "$out/summary.txt"
done
