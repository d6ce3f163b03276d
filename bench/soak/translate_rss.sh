#!/usr/bin/env bash
# tx-translate over an endless stream: resident memory and lines/s as the output grows.
#
#   bench/soak/translate_rss.sh MODEL VOCAB INPUT LINES [EVERY] [tx-translate flags...]
#
# Feeds INPUT's lines over and over (LINES in all) to one tx-translate process and, every
# EVERY output lines (default 100,000), prints: lines out, VmRSS, the peak RSS since the last
# row and the peak since the start in MB, lines/s since the last row. The interval's peak comes
# from resetting VmHWM after each row (`echo 5 > /proc/PID/clear_refs`); a kernel that refuses
# the reset makes it equal the overall peak. SHUFFLE=SEED draws each line uniformly at random
# from INPUT instead (awk's generator, seeded): a stream whose statistics do not change, so
# that each interval sees the same mix of lengths. The issue's question (docs/determinism.md's neighbour, issue 27): does RSS stay
# flat once the read window (--maxi-batch) is full?
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
model="${1:?usage: $0 MODEL VOCAB INPUT LINES [EVERY] [flags]}"
vocab="${2:?vocabulary}"
input="${3:?input file}"
lines="${4:?line count}"
every="${5:-100000}"
shift $(( $# >= 5 ? 5 : 4 ))
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores; $lines lines of $(basename "$input") $([ -n "${SHUFFLE:-}" ] && echo "drawn at random (seed $SHUFFLE)" || echo repeated); flags: $*"
echo "lines_out rss_mb interval_peak_mb peak_mb lines_per_s"
# awk ends by itself after LINES lines (a `while :; do cat; done | head` loop would keep
# spinning after head exits).
if [ -n "${SHUFFLE:-}" ]; then
  awk -v n="$lines" -v seed="$SHUFFLE" '{ a[NR] = $0 } END { srand(seed)
    for (c = 0; c < n; ++c) print a[1 + int(rand() * NR)] }' "$input"
else
  awk -v n="$lines" -v f="$input" 'BEGIN { while (c < n) { while ((getline l < f) > 0) {
    print l; if (++c >= n) exit } close(f) } }'
fi |
  "$bin/tx-translate" -m "$model" -v "$vocab" --quiet "$@" > "$out" &
pid=$!
# $! is the last process of the pipeline: tx-translate.
next=$every last_lines=0 last_t=$(date +%s.%N) peak=0
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  n=$(wc -l < "$out")
  if [ "$n" -ge "$next" ]; then
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    echo 5 > "/proc/$pid/clear_refs" 2>/dev/null || true
    [ "$hwm" -gt "$peak" ] && peak=$hwm
    t=$(date +%s.%N)
    rate=$(echo "($n - $last_lines) / ($t - $last_t)" | bc -l)
    printf '%d %.1f %.1f %.1f %.0f\n' "$n" "$(echo "$rss / 1024" | bc -l)" \
      "$(echo "$hwm / 1024" | bc -l)" "$(echo "$peak / 1024" | bc -l)" "$rate"
    last_lines=$n last_t=$t
    next=$(( (n / every + 1) * every ))
  fi
done
wait "$pid"
echo "done: $(wc -l < "$out") lines out"
