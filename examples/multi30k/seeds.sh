#!/usr/bin/env bash
# The recipe once per seed, one after the other, then the mean and spread of its figures:
# what examples/multi30k/README.md reports for a configuration.
#
#   examples/multi30k/seeds.sh DATA_DIR WORK_DIR [tx-train flags]
#
# SEEDS (default "1 2 3") names the seeds; seed N trains in WORK_DIR/seedN with `--seed N`
# after the given flags. A seed whose scores.txt exists is not run again, so a stopped sweep
# resumes (run.sh resumes the seed it was in). The summary goes to stdout and
# WORK_DIR/summary.txt: per seed test2016 BLEU (averaged model, beam BEAM), val BLEU (same),
# training seconds; then the mean, the sample standard deviation and the range. With MEMBERS
# above 1, each seed is an ensemble of that many members (ensemble.sh) rather than run.sh's one
# model.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 2 ] || { echo "usage: $0 DATA_DIR WORK_DIR [tx-train flags]" >&2; exit 2; }
data="$1"
work="$2"
shift 2
seeds="${SEEDS:-1 2 3}"
beam="${BEAM:-5}"
recipe="$here/run.sh"
[ "${MEMBERS:-1}" = 1 ] || recipe="$here/ensemble.sh"
mkdir -p "$work"
for seed in $seeds; do
  [ -f "$work/seed$seed/scores.txt" ] && continue
  "$recipe" "$data" "$work/seed$seed" "$@" --seed "$seed"
done

# "averaged  beam 5  BLEU|... = 39.58 69.9/..." -> 39.58; "time: training 3898s, ..." -> 3898.
bleu() { sed -n "s/^$1 *beam $beam .*BLEU|[^ ]* = \([0-9.]*\) .*/\1/p" "$2" | head -1; }
# A figure missing from a seed's scores (another BEAM, a file from an older run.sh) would shift
# the columns the statistics read: named instead.
need() {
  [ -n "$1" ] || { echo "seeds.sh: error: '$3' has no $2; rerun that seed (remove its scores.txt) or give the BEAM it was scored at" >&2; exit 1; }
}
rows=""
for seed in $seeds; do
  s="$work/seed$seed/scores.txt"
  t=$(bleu averaged "$s"); need "$t" "test2016 BLEU of the averaged model at beam $beam" "$s"
  v=$(bleu val "$s"); need "$v" "val BLEU at beam $beam" "$s"
  secs=$(sed -n 's/^time: training \([0-9]*\)s.*/\1/p' "$s"); need "$secs" "training time" "$s"
  rows+=$(printf '%-5s %-9s %-6s %s' "$seed" "$t" "$v" "$secs")$'\n'
done
{
  printf 'seed  test2016  val    training_s\n'
  printf '%s' "$rows"
} | tee "$work/summary.txt"
awk 'NR > 1 { t[NR] = $2; v[NR] = $3; n++; st += $2; sv += $3; if ($4 > m) m = $4 }
     END {
       mt = st / n; mv = sv / n; lo = hi = t[2]
       for (i in t) { dt += (t[i] - mt)^2; dv += (v[i] - mv)^2; if (t[i] < lo) lo = t[i]; if (t[i] > hi) hi = t[i] }
       sdt = n > 1 ? sqrt(dt / (n - 1)) : 0; sdv = n > 1 ? sqrt(dv / (n - 1)) : 0
       printf "mean  %.2f (sd %.2f, %.2f to %.2f)  val %.2f (sd %.2f)  longest training %ss\n", mt, sdt, lo, hi, mv, sdv, m
     }' "$work/summary.txt" | tee -a "$work/summary.txt"
