#!/usr/bin/env bash
# The numbers task end to end: make the data, train, translate unseen numbers, score.
#
#   examples/numbers/run.sh [WORK_DIR]        (default: numbers-work)
#
# TX_BIN: where the programs are (default: build/apps beside this repository's root).
# TX_NUMBERS_UPDATES: training updates (default: config.json's after-updates); the test suite
# runs a shortened version with a few updates.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
work="${1:-numbers-work}"
[ -x "$bin/tx-train" ] || { echo "run.sh: error: no tx-train in '$bin'; build tx (README.md) or set TX_BIN to the folder of the programs" >&2; exit 1; }
mkdir -p "$work"
work="$(cd "$work" && pwd)"

bold=""; dim=""; green=""; red=""; reset=""
if [ -t 1 ]; then
  bold=$'\e[1m'; dim=$'\e[2m'; green=$'\e[32m'; red=$'\e[31m'; reset=$'\e[0m'
fi
step() { printf '\n%s== %s ==%s\n' "$bold" "$1" "$reset"; }

step "1. data: English number words -> German number words"
python3 "$here/make_data.py" "$work/data" --train "${TX_NUMBERS_TRAIN:-100000}"
printf '%s\n' "  $(wc -l <"$work/data/train.en") training pairs, $(wc -l <"$work/data/test.en") test pairs of numbers never seen in training, e.g.:"
paste -d '\t' <(head -3 "$work/data/train.en") <(head -3 "$work/data/train.de") |
  awk -F'\t' '{ printf "    %-45s -> %s\n", $1, $2 }'

step "2. train (tx-train, $(nproc) cores)"
rm -rf "$work/model"
updates=()
[ -n "${TX_NUMBERS_UPDATES:-}" ] && updates=(--after-updates "$TX_NUMBERS_UPDATES")
start=$(date +%s)
# The log in full to train.log, a few of its lines (and any error) on the terminal; a pipeline,
# so that tx-train's exit status (pipefail) and all of its lines are in before the next step.
{ "$bin/tx-train" --config "$here/config.json" "${updates[@]}" \
    --train-sets "$work/data/train.en" "$work/data/train.de" \
    --valid-sets "$work/data/valid.en" "$work/data/valid.de" -m "$work/model" 2>&1 >&3 |
    tee "$work/train.log" |
    sed -u -n -E '/Up\. [0-9,]+ : (Sen|cross)|vocabulary|model:|error|warning/ { s/^\[[^]]*\] /  /; p }' >&2
} 3>&1
echo "  trained in $(( $(date +%s) - start ))s; the log is $work/train.log"

step "3. translate the test set (tx-translate, beam 5)"
"$bin/tx-translate" -m "$work/model/model.safetensors" -v "$work/model/vocab.spm" \
  --beam-size 5 --quiet < "$work/data/test.en" > "$work/test.hyp.de"
[ "$(wc -l <"$work/test.hyp.de")" -eq "$(wc -l <"$work/data/test.en")" ] ||
  { echo "run.sh: error: $work/test.hyp.de has not one line per line of $work/data/test.en" >&2; exit 1; }
printf '  %-52s %-52s %s\n' "input" "output" "reference (if different)"
# A unit separator, not a tab: read would merge the tabs around an empty output.
paste -d $'\x1f' <(head -12 "$work/data/test.en") <(head -12 "$work/test.hyp.de") \
  <(head -12 "$work/data/test.de") |
  while IFS=$'\x1f' read -r src hyp ref; do
    if [ "$hyp" = "$ref" ]; then
      printf '  %-52s %s%-52s%s\n' "$src" "$green" "$hyp" "$reset"
    else
      printf '  %-52s %s%-52s%s %s%s%s\n' "$src" "$red" "$hyp" "$reset" "$dim" "$ref" "$reset"
    fi
  done

step "4. score"
total=$(wc -l <"$work/data/test.de")
exact=$(paste -d '\t' "$work/test.hyp.de" "$work/data/test.de" | awk -F'\t' '$1 == $2' | wc -l)
echo "  exact match: $exact / $total = $(( 100 * exact / total ))%" | tee "$work/exact-match.txt"
"$bin/tx-score" -r "$work/data/test.de" --metrics bleu chrf --quiet < "$work/test.hyp.de" |
  sed 's/^/  /' | tee "$work/scores.txt"

step "next, on your own data"
cat <<NEXT
  $bin/tx-train --train-sets corpus.src corpus.tgt --valid-sets dev.src dev.tgt -m model --keep-last 5
  $bin/tx-average --last 5 -m model -o model/averaged.safetensors
  $bin/tx-translate -m model/averaged.safetensors -v model/vocab.spm < input.src > output.tgt
NEXT
