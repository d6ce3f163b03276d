#!/usr/bin/env bash
# Two tx-train builds on the same work, in alternating rounds: each one's target tokens/s (the
# median over the rounds) and B's against A's, measured in one run on one machine; and whether
# their models after the updates are byte-identical (a change that must not move the numbers).
#
#   bench/train_ab.sh BIN_A BIN_B DATA_DIR [UPDATES=120] [ROUNDS=3]
#
# BIN_A, BIN_B: directories holding tx-train (e.g. a build of main and build/apps). DATA_DIR:
# the Multi30k directory. Each run is the recipe (examples/multi30k/config.json) for UPDATES
# updates from seed 1 on one shared vocabulary, warm-up 40 so that the rate is the peak's, no
# validation, no snapshot; the first logged span (start-up) is left out of the rate. EXTRA="..." adds
# tx-train flags to both (e.g. EXTRA="--cpu-threads 1").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
. "$here/common.sh"
a="${1:?usage: $0 BIN_A BIN_B DATA_DIR [UPDATES] [ROUNDS]}"
b="${2:?usage: $0 BIN_A BIN_B DATA_DIR [UPDATES] [ROUNDS]}"
data="${3:?usage: $0 BIN_A BIN_B DATA_DIR [UPDATES] [ROUNDS]}"
updates="${4:-120}" rounds="${5:-3}"
for bin in "$a" "$b"; do
  [ -x "$bin/tx-train" ] || { echo "train_ab.sh: no tx-train in '$bin'" >&2; exit 1; }
done
for f in train.en train.de; do
  [ -f "$data/$f" ] || { echo "train_ab.sh: '$data/$f' is missing; give the Multi30k directory" >&2; exit 1; }
done
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
echo "# $(cpu_model), $(nproc) cores, $updates updates x $rounds rounds${EXTRA:+, $EXTRA}"

# One run of BIN into DIR; prints its mean target tokens/s after the first span.
run() {
  local bin="$1" dir="$2" vocab=()
  rm -rf "$dir"
  [ -f "$work/vocab.spm" ] && vocab=(--vocabs "$work/vocab.spm" "$work/vocab.spm")
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  "$bin/tx-train" --config "$root/examples/multi30k/config.json" \
    --train-sets "$data/train.en" "$data/train.de" -m "$dir" "${vocab[@]}" \
    --after-updates "$updates" --after-epochs 0 --after-minutes 0 --lr-warmup 40 \
    --disp-freq 20 --save-freq 1000000 --keep-last 0 ${EXTRA:-} 2>"$dir.log" ||
    { echo "train_ab.sh: $bin/tx-train failed, see $dir.log" >&2; exit 1; }
  [ -f "$work/vocab.spm" ] || cp "$dir/vocab.spm" "$work/vocab.spm"
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rates = [r["words_per_s"] for r in rows if r["type"] == "train"][1:]
print(sum(rates) / max(1, len(rates)))' "$dir/train.log.jsonl"
}

rates_a=() rates_b=()
for ((r = 1; r <= rounds; ++r)); do
  # Alternate which goes first, so that a drift of the machine's speed falls on both.
  if ((r % 2)); then
    rates_a+=("$(run "$a" "$work/a")") rates_b+=("$(run "$b" "$work/b")")
  else
    rates_b+=("$(run "$b" "$work/b")") rates_a+=("$(run "$a" "$work/a")")
  fi
  echo "round $r: A $(printf '%.0f' "${rates_a[-1]}"), B $(printf '%.0f' "${rates_b[-1]}") target tokens/s"
done
ma="$(echo "${rates_a[*]}" | median)" mb="$(echo "${rates_b[*]}" | median)"
same="differ"
cmp -s "$work/a/model.safetensors" "$work/b/model.safetensors" && same="byte-identical"
printf 'A %s: %.0f, B %s: %.0f target tokens/s (medians); B/A %.3f; models %s\n' \
  "$a" "$ma" "$b" "$mb" "$(awk -v x="$mb" -v y="$ma" 'BEGIN { print x / y }')" "$same"
