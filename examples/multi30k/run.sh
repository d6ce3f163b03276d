#!/usr/bin/env bash
# The Multi30k English -> German recipe: train, average the last snapshots, translate
# test2016 (and val, the figure for choosing between configurations), score with sacreBLEU's
# BLEU (cased, 13a) and chrF.
#
#   examples/multi30k/run.sh DATA_DIR [WORK_DIR]
#
# DATA_DIR holds train.{en,de}, val.{en,de} and test2016.{en,de} (../shared/data/multi30k
# here); WORK_DIR (default multi30k-work) gets the model, the translations and the scores.
# The options are in config.json beside this script (tx-train --config); flags after the two
# directories override them, e.g. `run.sh data work --after-epochs 10`. Ctrl-C saves the
# checkpoint and exits 130; the same command again resumes.
# TX_BIN: where the programs are (default: build/apps of this repository). AVERAGE: how many
# snapshots to average (default 3, at most config.json's keep-last). BEAM: default 5.
# NORMALIZE: tx-translate's length normalisation (default 1.8, chosen on val).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
usage="usage: $0 DATA_DIR [WORK_DIR [tx-train flags]]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
data="$1"
work="${2:-multi30k-work}"
case "$work" in -*) echo "run.sh: error: '$work' is a flag; give WORK_DIR before the flags ($usage)" >&2; exit 2 ;; esac
shift $(( $# >= 2 ? 2 : 1 ))
[ -x "$bin/tx-train" ] || { echo "run.sh: error: no tx-train in '$bin'; build tx (README.md) or set TX_BIN to the folder of the programs" >&2; exit 1; }
for f in train.en train.de val.en val.de test2016.en test2016.de; do
  [ -f "$data/$f" ] || { echo "run.sh: error: '$data/$f' is missing; give the Multi30k data directory" >&2; exit 1; }
done
mkdir -p "$work"
average="${AVERAGE:-3}"
beam=$(( 10#${BEAM:-5} ))  # (BEAM=05 is beam 5, one file name)
normalize="${NORMALIZE:-1.8}"

# Ctrl-C reaches the whole job: tx-train then finishes its update and saves, while the tee
# ignores it (a tee killed first would take tx-train's stderr, and tx-train with it, before
# the save). A stopped run is resumed by the same command, so nothing after training runs.
interrupted=0
trap 'interrupted=1' INT TERM
rm -f "$work/scores.txt"  # an earlier run's: this one is done only when it writes its own
# (A pipeline, not 2> >(tee): its end is tee's too, so the log is complete below.)
status=0
called=$(date +%s%3N)
{ "$bin/tx-train" --config "$here/config.json" "$@" \
    --train-sets "$data/train.en" "$data/train.de" --valid-sets "$data/val.en" "$data/val.de" \
    -m "$work/model" 2>&1 >&3 | (trap '' INT TERM; exec tee -p -a "$work/train.log") >&2; } 3>&1 ||
  status=$?
trap - INT TERM
# Each call's training time (ms), so that a resumed run's time line counts every call: one
# line a call that got as far as the model folder, whatever its end (a run.sh killed outright
# writes none), kept in that folder so that a run started over there starts from 0.
if [ -d "$work/model" ]; then
  echo "$(( $(date +%s%3N) - called ))" >> "$work/model/training-calls.ms"
fi
# Killed (SIGKILL, or a signal during the set-up, before tx-train takes them): its last
# checkpoint, if it had made one, is whole.
if [ "$status" -gt 128 ]; then
  echo "run.sh: tx-train ended on signal $((status - 128))$([ "$status" = 137 ] && echo ' (SIGKILL: out of memory, or kill -9)'); run the same command again to go on from its last checkpoint, if any" >&2
  exit "$status"
fi
[ "$status" = 0 ] || exit "$status"
# A signal to tx-train alone (a scheduler's, a kill) stops it with success too: the last record
# of its train.log.jsonl says so, with or without --quiet. (A signal to run.sh alone waits for
# the training to end: send it to tx-train, or to the process group as Ctrl-C does.)
last=$(tail -n 1 "$work/model/train.log.jsonl" 2>/dev/null || true)
if [ "$interrupted" = 1 ] || [[ "$last" == *'"type":"stop"'* ]]; then
  echo "run.sh: training stopped on a signal, its checkpoint saved; run the same command again to go on" >&2
  exit 130
fi
trained=$(date +%s)
calls=$(wc -l < "$work/model/training-calls.ms")
training=$(awk '{ ms += $1 } END { printf "%d", (ms + 500) / 1000 }' "$work/model/training-calls.ms")

"$bin/tx-average" --last "$average" -m "$work/model" -o "$work/model/averaged.safetensors"

# Translate with the averaged model and, for comparison, the last one; greedy and beam.
vocab="$work/model/vocab.spm"
for model in averaged model; do
  for b in $(printf '%s\n' "$beam" 1 | sort -u); do
    "$bin/tx-translate" -m "$work/model/$model.safetensors" -v "$vocab" --beam-size "$b" \
      --normalize "$normalize" --quiet < "$data/test2016.en" > "$work/test2016.$model.beam$b.de"
  done
done
# val, translated as test2016's line is: the figure that choices between configurations use.
"$bin/tx-translate" -m "$work/model/averaged.safetensors" -v "$vocab" --beam-size "$beam" \
  --normalize "$normalize" --quiet < "$data/val.en" > "$work/val.averaged.beam$beam.de"
translated=$(date +%s)

{
  for model in averaged model; do
    for b in $(printf '%s\n' "$beam" 1 | sort -rnu); do
      printf '%-9s beam %-2s ' "$model" "$b"
      "$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet \
        < "$work/test2016.$model.beam$b.de" | head -1
    done
  done
  printf '%-9s beam %-2s ' "val" "$beam"
  "$bin/tx-score" -r "$data/val.de" --metrics bleu --quiet < "$work/val.averaged.beam$beam.de" \
    | head -1
  echo "chrF (averaged, beam $beam):"
  "$bin/tx-score" -r "$data/test2016.de" --metrics chrf --quiet < "$work/test2016.averaged.beam$beam.de"
  echo "time: training ${training}s$([ "$calls" -gt 1 ] && echo " (over $calls calls)"), averaging + translating $(( translated - trained ))s, total $(( training + translated - trained ))s on $(nproc) cores"
} | tee "$work/scores.txt.tmp"
# Complete or absent: seeds.sh takes a seed with a scores.txt as done.
mv "$work/scores.txt.tmp" "$work/scores.txt"

# The curve, where a Python with matplotlib is found (Debian: python3-matplotlib).
for py in python3 /usr/bin/python3; do
  if "$py" -c "import matplotlib" 2>/dev/null; then
    "$py" "$here/../plot_log.py" "$work/model/train.log.jsonl" "$work/curve.png"
    break
  fi
done
