#!/usr/bin/env bash
# The cost of batch invariance: two tx-translate builds (or one build with and without extra
# flags) timed alternately on the same input, at beam 5 x 32, beam 5 x 1 and greedy x 32.
#
#   bench/determinism/cost.sh OLD_BIN NEW_BIN MODEL VOCAB INPUT [ROUNDS] [-- NEW_FLAGS...]
#
# Prints per setting the median seconds of each over ROUNDS (default 3) alternating rounds,
# NEW / OLD, and whether the two outputs are identical. Both run with the machine's threads.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/../common.sh"
old="${1:?usage: $0 OLD_BIN NEW_BIN MODEL VOCAB INPUT [ROUNDS] [-- NEW_FLAGS...]}"
new="${2:?new tx-translate}"
model="${3:?model}"
vocab="${4:?vocabulary}"
input="${5:?input}"
rounds="${6:-3}"
shift $(( $# >= 6 ? 6 : 5 ))
[ "${1:-}" = "--" ] && shift
new_flags=("$@")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "# $(cpu_model), $(nproc) cores; $(wc -l < "$input") lines of $(basename "$input")"
printf '%-14s %8s %8s %7s %s\n' setting old_s new_s new/old outputs
for setting in "--beam-size 5 --mini-batch 32" "--beam-size 5 --mini-batch 1" \
               "--beam-size 1 --mini-batch 32"; do
  : > "$tmp/old.t"; : > "$tmp/new.t"
  for _ in $(seq "$rounds"); do
    for which in old new; do
      bin=$old flags=()
      [ "$which" = new ] && bin=$new flags=("${new_flags[@]}")
      # shellcheck disable=SC2086  # the setting is a list of flags
      s=$(date +%s.%N)
      "$bin" -m "$model" -v "$vocab" --quiet $setting "${flags[@]}" < "$input" > "$tmp/$which.out"
      seconds_since "$s" >> "$tmp/$which.t"
    done
  done
  o=$(median < "$tmp/old.t") n=$(median < "$tmp/new.t")
  same=$(cmp -s "$tmp/old.out" "$tmp/new.out" && echo identical || echo "$(diff "$tmp/old.out" "$tmp/new.out" | grep -c '^>') lines differ")
  printf '%-14s %8.2f %8.2f %7.3f %s\n' "$(echo "$setting" | sed 's/--beam-size /beam /; s/ --mini-batch / x /')" "$o" "$n" "$(echo "$n / $o" | bc -l)" "$same"
done
