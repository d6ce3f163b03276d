#!/usr/bin/env bash
# --shortlist's speed and BLEU, in one run on one machine:
#  1. a trained model (MODEL, VOCAB: a joint .spm): test2016 BLEU and time, beam 5 x 32, with
#     and without a Model 1 shortlist of Multi30k (several FIRST/BEST);
#  2. the OPUS-MT shape with a 32k vocabulary: transformer-base (6+6, d512) with a joint 32k
#     vocabulary trained on Multi30k + the WMT news tests in ../shared/data, after 1 update
#     (the speed of a step does not depend on training), 200 lines of newstest2013, beam 5 x 32
#     and greedy x 32, with and without a shortlist made from the same corpus.
#
#   bench/shortlist/run.sh MODEL VOCAB [WORK=/tmp/shortlist-bench]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
. "$here/../common.sh"
py="${PYTHON:-$root/bench/.venv/bin/python}"
data="$root/../shared/data"
model="$1" vocab="$2" work="${3:-/tmp/shortlist-bench}"
mkdir -p "$work"
cpu="$(cpu_model)"
echo "# $cpu, $(nproc) cores, $(git -C "$root" rev-parse --short HEAD)"
timed() {  # timed OUT FLAGS... < input: seconds on stdout
  local out="$1" t0
  shift
  t0=$(date +%s.%N)
  "$bin/tx-translate" --quiet "$@" >"$out"
  seconds_since "$t0"
}
bleu() { "$bin/tx-score" -r "$1" --metrics bleu --score-only --quiet <"$2"; }

m30k="$data/multi30k"
[ -f "$work/m30k.s2t" ] || "$py" "$here/make_lex.py" "$m30k/train.en" "$m30k/train.de" "$vocab" \
  "$vocab" "$work/m30k.s2t" 5 2>/dev/null
# ROUNDS alternating rounds (default 3), the median of each: the machine's noise moves a run
# by 20%.
rounds="${ROUNDS:-3}"
compare() {  # compare LABEL REF INPUT TABLE SHORTLISTS... (one string of tx-translate flags each first)
  local label="$1" ref="$2" input="$3" table="$4" base_flags="$5"
  shift 5
  declare -A times
  for ((r = 0; r < rounds; r++)); do
    for s in "$@"; do
      flags=()
      [ "$s" = none ] || flags=(--shortlist "$table" $s)
      # shellcheck disable=SC2086
      times[$s]+=" $(timed "$work/out.$r" $base_flags "${flags[@]}" <"$input")"
      cp "$work/out.$r" "$work/out.${s// /_}"
    done
  done
  for s in "$@"; do
    local result="$(wc -w <"$work/out.${s// /_}") output words"
    [ -z "$ref" ] || result="BLEU $(bleu "$ref" "$work/out.${s// /_}")"
    echo "$label, shortlist [$s]: median $(echo "${times[$s]}" | median) s of$(echo "${times[$s]}"), $result"
  done
}
compare "trained model, test2016, beam 5 x 32" "$m30k/test2016.de" "$m30k/test2016.en" \
  "$work/m30k.s2t" "-m $model -v $vocab --beam-size 5 --mini-batch 32" none "100 100" "50 50" "100 20"

news="$work/news"
if [ ! -f "$news.en" ]; then
  cat "$data"/wmt-newstest-de-en/*.en "$m30k/train.en" >"$news.en"
  cat "$data"/wmt-newstest-de-en/*.de "$m30k/train.de" >"$news.de"
  for f in "$data"/wmt-newstest-de-en/*.en; do
    [ "$(wc -l <"$f")" -eq "$(wc -l <"${f%.en}.de")" ] || { echo "unaligned $f" >&2; exit 1; }
  done
fi
big="$work/base32k"
if [ ! -f "$big/model.safetensors" ]; then
  "$bin/tx-train" --task transformer-base --dim-vocabs 32000 --train-sets "$news.en" "$news.de" \
    --after-updates 1 --max-tokens 1024 -m "$big" --quiet
fi
[ -f "$work/news.s2t" ] || "$py" "$here/make_lex.py" "$news.en" "$news.de" "$big/vocab.spm" \
  "$big/vocab.spm" "$work/news.s2t" 5 2>/dev/null
head -200 "$data/wmt14/newstest2013.en" >"$work/nt13.en"
for setting in "5 32" "1 32"; do
  set -- $setting
  compare "transformer-base 32k, 200 lines, beam $1 x $2" "" "$work/nt13.en" "$work/news.s2t" \
    "-m $big/model.safetensors -v $big/vocab.spm --beam-size $1 --mini-batch $2" none "100 100" "50 50"
done
