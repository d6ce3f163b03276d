#!/usr/bin/env bash
# tx-translate over an endless stream: resident memory, lines/s and CPU time per line as the
# output grows.
#
#   bench/soak/translate_rss.sh MODEL VOCAB INPUT LINES [EVERY] [tx-translate flags...]
#
# Feeds INPUT's lines over and over (LINES in all) to one tx-translate process and, every
# EVERY output lines (default 100,000), prints: lines out; VmRSS, the peak RSS since the last
# row and the peak since the start in MB; lines/s since the last row; tx-translate's user and
# system CPU time per line since the last row in ms; the machine's CPU time spent outside
# tx-translate and stolen by the hypervisor over the row, in percent of the machine. The last
# three separate a slower tx (its CPU time per line grows) from a busier machine (lines/s falls
# at the same CPU time per line). The interval's peak comes from resetting VmHWM after each row
# (`echo 5 > /proc/PID/clear_refs`); a kernel that refuses the reset makes it equal the overall
# peak. SHUFFLE=SEED draws each line uniformly at random from INPUT instead (awk's generator,
# seeded): a stream whose statistics do not change, so that each interval sees the same mix of
# lengths. The output is counted as it passes (never re-read), so watching costs the same at
# every row. The issue's question (issue 27): does RSS stay flat once the read window
# (--maxi-batch) is full?
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$here/../common.sh"
bin="${TX_BIN:-$root/build/apps}"
model="${1:?usage: $0 MODEL VOCAB INPUT LINES [EVERY] [flags]}"
vocab="${2:?vocabulary}"
input="${3:?input file}"
lines="${4:?line count}"
every="${5:-100000}"
shift $(( $# >= 5 ? 5 : 4 ))
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkfifo "$work/out"
echo 0 > "$work/count"
echo "# $(cpu_model), $(nproc) cores; $lines lines of $(basename "$input") $([ -n "${SHUFFLE:-}" ] && echo "drawn at random (seed $SHUFFLE)" || echo repeated); flags: $*"
echo "lines_out rss_mb interval_peak_mb peak_mb lines_per_s user_ms_per_line sys_ms_per_line others_pct steal_pct"
# The counter writes the number of lines seen every 1,000 lines and at the end.
awk -v f="$work/count" 'NR % 1000 == 0 { print NR > f; close(f) } END { print NR > f; close(f) }' \
  < "$work/out" &
counter=$!
# awk ends by itself after LINES lines (a `while :; do cat; done | head` loop would keep
# spinning after head exits).
if [ -n "${SHUFFLE:-}" ]; then
  awk -v n="$lines" -v seed="$SHUFFLE" '{ a[NR] = $0 } END { srand(seed)
    for (c = 0; c < n; ++c) print a[1 + int(rand() * NR)] }' "$input"
else
  awk -v n="$lines" -v f="$input" 'BEGIN { while (c < n) { while ((getline l < f) > 0) {
    print l; if (++c >= n) exit } close(f) } }'
fi |
  "$bin/tx-translate" -m "$model" -v "$vocab" --quiet "$@" > "$work/out" &
pid=$!
# $! is the last process of the pipeline: tx-translate.
# tx-translate's user and system ticks; the machine's busy (not idle, not iowait) and stolen ticks.
proc_ticks() { awk '{ print $14, $15 }' "/proc/$pid/stat" 2>/dev/null; }
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
hz=$(getconf CLK_TCK)
next=$every last_lines=0 last_t=$(date +%s.%N) peak=0
read -r last_u last_s <<< "$(proc_ticks)"
read -r last_busy last_steal last_all <<< "$(machine_ticks)"
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  n=$(cat "$work/count")
  if [ "$n" -ge "$next" ]; then
    # A process that has just ended has no row to give (its last lines are in the total).
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
    hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
    read -r u s <<< "$(proc_ticks)"
    [ -n "$rss" ] && [ -n "$hwm" ] && [ -n "$s" ] || break
    read -r busy steal all <<< "$(machine_ticks)"
    { echo 5 > "/proc/$pid/clear_refs"; } 2>/dev/null || true
    [ "$hwm" -gt "$peak" ] && peak=$hwm
    t=$(date +%s.%N)
    d=$(( n - last_lines )) dall=$(( all - last_all ))
    [ "$dall" -gt 0 ] || dall=1
    printf '%d %.1f %.1f %.1f %.0f %.3f %.3f %.1f %.1f\n' "$n" "$(echo "$rss / 1024" | bc -l)" \
      "$(echo "$hwm / 1024" | bc -l)" "$(echo "$peak / 1024" | bc -l)" \
      "$(echo "$d / ($t - $last_t)" | bc -l)" \
      "$(echo "($u - $last_u) * 1000 / $hz / $d" | bc -l)" \
      "$(echo "($s - $last_s) * 1000 / $hz / $d" | bc -l)" \
      "$(echo "($busy - $last_busy - ($u - $last_u) - ($s - $last_s)) * 100 / $dall" | bc -l)" \
      "$(echo "($steal - $last_steal) * 100 / $dall" | bc -l)"
    last_lines=$n last_t=$t last_u=$u last_s=$s last_busy=$busy last_steal=$steal last_all=$all
    next=$(( (n / every + 1) * every ))
  fi
done
wait "$pid"
wait "$counter"
echo "done: $(cat "$work/count") lines out"
