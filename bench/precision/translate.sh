#!/usr/bin/env bash
# tx-translate per --precision on one model: seconds, speed-up over fp32 and BLEU, measured in
# one run on one machine.
#
#   bench/precision/translate.sh MODEL VOCAB DATA_DIR [ROUNDS=3] [PRECISIONS="fp32 bf16"]
#
# Translates DATA_DIR/test2016.en at beam 5 x 32, beam 5 x 1 and greedy x 32 in each precision,
# alternating precisions ROUNDS times (medians), then scores each setting's output against
# test2016.de (sacreBLEU's BLEU through tx-score) and counts the lines that differ from fp32's.
# A precision the CPU refuses (bf16 without AVX512_BF16) prints its one-line refusal.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${TX_BIN:-$here/../../build/apps}"
. "$here/../common.sh"
model="${1:?usage: $0 MODEL VOCAB DATA_DIR [ROUNDS] [PRECISIONS]}"
vocab="${2:?vocabulary}"
data="${3:?Multi30k directory}"
rounds="${4:-3}"
read -r -a precisions <<< "${5:-fp32 bf16}"
for f in test2016.en test2016.de; do
  [ -f "$data/$f" ] || { echo "translate.sh: '$data/$f' is missing; give the Multi30k directory" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "# $(cpu_model), $(nproc) cores; $(wc -l < "$data/test2016.en") lines of test2016"
bleu() { "$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet < "$1" | grep -o '= [0-9.]*' | head -1 | tr -d '= '; }
echo "| setting | precision | seconds | speed-up vs ${precisions[0]} | BLEU | lines unlike ${precisions[0]}'s |"
echo "|---|---|---|---|---|---|"
for setting in "--beam-size 5 --mini-batch 32" "--beam-size 5 --mini-batch 1" \
               "--beam-size 1 --mini-batch 32"; do
  for p in "${precisions[@]}"; do : > "$tmp/$p.t"; done
  for _ in $(seq "$rounds"); do
    for p in "${precisions[@]}"; do
      s=$(date +%s.%N)
      # shellcheck disable=SC2086  # the setting is a list of flags
      if ! "$bin/tx-translate" -m "$model" -v "$vocab" --quiet --precision "$p" $setting \
           < "$data/test2016.en" > "$tmp/$p.out" 2> "$tmp/$p.err"; then
        echo "refused" > "$tmp/$p.t"; continue
      fi
      seconds_since "$s" >> "$tmp/$p.t"
    done
  done
  name="$(echo "$setting" | sed 's/--beam-size /beam /; s/ --mini-batch / x /')"
  base=$(median < "$tmp/${precisions[0]}.t")
  for p in "${precisions[@]}"; do
    if grep -q refused "$tmp/$p.t"; then
      echo "| $name | $p | refused: $(head -1 "$tmp/$p.err") | | | |"; continue
    fi
    t=$(median < "$tmp/$p.t")
    differ=$(diff "$tmp/${precisions[0]}.out" "$tmp/$p.out" | grep -c '^>' || true)
    printf '| %s | %s | %.2f | %.2fx | %s | %s |\n' "$name" "$p" "$t" "$(echo "$base / $t" | bc -l)" "$(bleu "$tmp/$p.out")" "$differ"
  done
done
