#!/usr/bin/env bash
# The Multi30k recipe (examples/multi30k/config.json) trained once per variant and seed, each
# variant a set of tx-train flags on top of the config, and judged on val only: val BLEU (beam
# 5, --normalize as run.sh, sacreBLEU's 13a) of the last model and of the average of the last
# 3 snapshots (what run.sh ships), and the last validation cross-entropy; then each variant's
# mean over the seeds. For choosing the recipe's options; test2016 is not read.
#
#   bench/recipe/variants.sh DATA_DIR VOCAB OUT_DIR DEVICE NAME="FLAGS" [NAME="FLAGS" ...]
#
# e.g. SEEDS="1 2" JOBS=4 variants.sh ../shared/data/multi30k - out cuda base="" h8="--heads 8"
# VOCAB: a joint .spm, the same for every run, so that only the flags differ; or - for each run
# to learn its own on the fly as run.sh does (needed when a variant sets --dim-vocabs).
# SEEDS: the seeds each variant runs with (default 1). JOBS: runs side by side (default 1; a
# GPU holds several of the recipe's small model). NORMALIZE: default 1.8, as run.sh.
# TRAIN_FLAGS: tx-train flags for every run (e.g. --cpu-threads 2 when runs share a machine).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
[ $# -ge 5 ] || { echo "usage: $0 DATA_DIR VOCAB|- OUT_DIR DEVICE NAME=\"FLAGS\" [NAME=\"FLAGS\" ...]" >&2; exit 2; }
data="$1" vocab="$2" out="$3" device="$4"
shift 4
given=" "
for variant in "$@"; do
  case "$variant" in *=*) ;; *) echo "variants.sh: '$variant' is no NAME=\"FLAGS\" (base=\"\" for the config alone)" >&2; exit 2 ;; esac
  # NAME names files and is matched in summary.txt: letters, digits, _ and - only, each once.
  name="${variant%%=*}"
  [[ "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "variants.sh: NAME '$name' may hold letters, digits, _ and - only" >&2; exit 2; }
  [[ "$given" != *" $name "* ]] || { echo "variants.sh: NAME '$name' is given twice" >&2; exit 2; }
  given+="$name "
done
# Ctrl-C or a TERM ends the runs too: each run passes it on to its tx-train, which saves, and is
# recorded as stopped (scored, it would pass for a finished run).
trap 'trap - INT TERM; kill -TERM $(jobs -p) 2>/dev/null; wait; rm -f "$failed"; exit 130' INT TERM
seeds="${SEEDS:-1}" jobs="${JOBS:-1}" normalize="${NORMALIZE:-1.8}"
mkdir -p "$out"
failed="$out/.failed.$$"  # the runs of this invocation that failed or stopped

# One run: trains NAME with FLAGS and SEED into OUT/NAME.sSEED, appends its line to summary.txt.
run() {
  local name="$1" seed="$2" flags="$3" dir="$out/$1.s$2" log="$out/$1.s$2.log"
  local v=() vfile
  rm -rf "$dir"
  [ "$vocab" = - ] || v=(--vocabs "$vocab" "$vocab")
  local t0 t1 rc
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # FLAGS is a list of words
  "$bin/tx-train" --config "$root/examples/multi30k/config.json" --device "$device" --seed "$seed" \
    ${TRAIN_FLAGS:-} $flags "${v[@]}" --train-sets "$data/train.en" "$data/train.de" \
    --valid-sets "$data/val.en" "$data/val.de" -m "$dir" 2>"$log" &
  local tp=$!
  # A TERM to this run (the trap above) goes on to tx-train; wait again until it has saved.
  trap 'kill -TERM $tp 2>/dev/null' TERM
  while :; do
    wait "$tp"
    rc=$?
    kill -0 "$tp" 2>/dev/null || break
  done
  trap - TERM
  t1=$(date +%s.%N)
  # A stop on a signal ends the run's log with a "stop" record.
  if [ "$rc" != 0 ] || tail -n 1 "$dir/train.log.jsonl" 2>/dev/null | grep -q '"type":"stop"'; then
    echo "$name seed $seed [$flags]: rc $rc, stopped or failed, see $log" >>"$out/summary.txt"
    echo "$name.s$seed" >>"$failed"
    return
  fi
  vfile="$vocab"
  [ "$vocab" != - ] || vfile="$dir/vocab.spm"
  if ! "$bin/tx-average" --last 3 -m "$dir" -o "$dir/averaged.safetensors" 2>>"$log"; then
    echo "$name seed $seed [$flags]: rc 0, averaging failed, see $log" >>"$out/summary.txt"
    echo "$name.s$seed" >>"$failed"
    return
  fi
  local scores="" m
  for m in model averaged; do
    local bleu=""
    "$bin/tx-translate" -m "$dir/$m.safetensors" -v "$vfile" --device "$device" --beam-size 5 \
      --normalize "$normalize" --quiet <"$data/val.en" >"$dir/val.$m.de" 2>>"$log" &&
      bleu=$("$bin/tx-score" -r "$data/val.de" --metrics bleu --score-only --quiet \
        <"$dir/val.$m.de" 2>>"$log")
    if [ -z "$bleu" ]; then
      echo "$name seed $seed [$flags]: rc 0, translating or scoring $m failed, see $log" >>"$out/summary.txt"
      echo "$name.s$seed" >>"$failed"
      return
    fi
    scores+=" $m $bleu"
  done
  echo "$name seed $seed [$flags]: rc $rc, $(awk "BEGIN{printf \"%.0f\", $t1 - $t0}") s, val BLEU:$scores," \
    "last $(grep 'cross-entropy :' "$log" | tail -1 | grep -o 'Up\. [0-9,]* : cross-entropy : [0-9.]*')" \
    >>"$out/summary.txt"
}

# This invocation's runs replace their earlier lines (their directories are made anew): the
# means below are over the runs this summary describes.
if [ -f "$out/summary.txt" ]; then
  drop=()
  for variant in "$@"; do drop+=(-e "^${variant%%=*} seed " -e "^${variant%%=*}: "); done
  grep -v "${drop[@]}" "$out/summary.txt" >"$out/summary.txt.new"
  [ $? -le 1 ] && mv "$out/summary.txt.new" "$out/summary.txt"
fi
names=()
for variant in "$@"; do
  name="${variant%%=*}" flags="${variant#*=}"
  names+=("$name")
  for seed in $seeds; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    run "$name" "$seed" "$flags" &
  done
done
wait
# Each variant's mean val BLEU (averaged model) over its seeds, in the order given.
for name in "${names[@]}"; do
  grep "^$name seed " "$out/summary.txt" | sed -n 's/.* averaged \([0-9][0-9.]*\),.*/\1/p' |
    awk -v n="$name" '{s += $1; k++; v = v " " $1} END {if (k) printf "%s: val BLEU (averaged) mean %.2f over %d seeds:%s\n", n, s / k, k, v; else printf "%s: no run scored\n", n}'
done | tee -a "$out/summary.txt"
# Non-zero when a run of this invocation failed or stopped.
[ ! -s "$failed" ] || { echo "variants.sh: failed or stopped: $(tr '\n' ' ' <"$failed")" >&2; rm -f "$failed"; exit 1; }
rm -f "$failed"
