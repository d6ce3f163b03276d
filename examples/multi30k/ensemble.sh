#!/usr/bin/env bash
# The recipe as an ensemble: MEMBERS models (default 2) trained side by side on one vocabulary,
# each on its share of the cores for the same 66 minutes, each averaged as run.sh averages;
# then val and test2016 translated by the ensemble of the averaged members (tx-translate -m A B)
# and scored as run.sh scores.
#
#   examples/multi30k/ensemble.sh DATA_DIR [WORK_DIR [tx-train flags]]
#
# Member K of M trains in WORK_DIR/memberK with run.sh and `--seed M*(S-1)+K`, where S is the
# `--seed` among the flags (default 1): the ensemble's seed, so that ensembles of other seeds
# share no member. `--cpu-threads` defaults to the cores divided among the members. Ctrl-C
# stops every member (each saves) and exits 130; the same command resumes them; a member whose
# scores.txt exists is done and is not run again. WORK_DIR/scores.txt has the ensemble's
# figures in run.sh's layout, its training time the longest member's.
# TX_BIN, AVERAGE, BEAM, NORMALIZE: as run.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
usage="usage: $0 DATA_DIR [WORK_DIR [tx-train flags]]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
data="$1"
work="${2:-multi30k-ensemble}"
case "$work" in -*) echo "ensemble.sh: error: '$work' is a flag; give WORK_DIR before the flags ($usage)" >&2; exit 2 ;; esac
shift $(( $# >= 2 ? 2 : 1 ))
members="${MEMBERS:-2}"
[[ "$members" =~ ^[1-9][0-9]*$ ]] || { echo "ensemble.sh: error: MEMBERS='$members' is not a count; give one such as 2" >&2; exit 2; }
beam=$(( 10#${BEAM:-5} ))
normalize="${NORMALIZE:-1.8}"

# The ensemble's seed and thread count come out of the flags; the rest go to every member.
# (Given twice, either is refused, as tx-train refuses a flag given twice.)
seed="" threads="" flags=()
take() {  # take NAME VALUE: the value of a flag this script keeps for itself
  [ -z "${!1}" ] || { echo "ensemble.sh: error: --${1/threads/cpu-threads} is given twice; give it once" >&2; exit 2; }
  [ -n "$2" ] || { echo "ensemble.sh: error: --${1/threads/cpu-threads} needs a value" >&2; exit 2; }
  printf -v "$1" '%s' "$2"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --seed | --cpu-threads)
      [ $# -ge 2 ] || { echo "ensemble.sh: error: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --seed ]; then take seed "$2"; else take threads "$2"; fi
      shift 2 ;;
    --seed=*) take seed "${1#--seed=}"; shift ;;
    --cpu-threads=*) take threads "${1#--cpu-threads=}"; shift ;;
    *) flags+=("$1"); shift ;;
  esac
done
seed="${seed:-1}"
[[ "$seed" =~ ^[1-9][0-9]*$ ]] || { echo "ensemble.sh: error: --seed '$seed' is not a whole number from 1 (an ensemble's seed S gives its members seeds M(S-1)+1 to MS)" >&2; exit 2; }
# 0 or none: the cores divided among the members (tx-train's 0 would give each all of them).
[[ "${threads:-0}" =~ ^[0-9]+$ ]] || { echo "ensemble.sh: error: --cpu-threads '$threads' is not a whole number" >&2; exit 2; }
[ "${threads:-0}" != 0 ] || threads=$(( $(nproc) / members > 0 ? $(nproc) / members : 1 ))
# WORK's members were seeded for one ensemble (member K of M: M(S-1)+K): another MEMBERS or
# --seed over them would mix the members of two.
record="MEMBERS=$members --seed $seed"
if [ -d "$work/member1" ] && [ -f "$work/ensemble.txt" ] && [ "$(cat "$work/ensemble.txt")" != "$record" ]; then
  echo "ensemble.sh: error: $work holds the members of $(cat "$work/ensemble.txt"), not $record; give those again, or another WORK_DIR" >&2
  exit 2
fi
mkdir -p "$work"
printf '%s\n' "$record" > "$work/ensemble.txt"
rm -f "$work/scores.txt"

# Member 1 trains the vocabulary (or has it from an earlier run); the others start with a
# copy in their model folders, which tx-train uses as it is.
vocab="$work/member1/model/vocab.spm"
for k in $(seq 2 "$members"); do
  v="$work/member$k/model/vocab.spm"
  [ ! -f "$v" ] || [ ! -f "$vocab" ] || cmp -s "$vocab" "$v" ||
    { echo "ensemble.sh: error: member $k's vocabulary differs from member 1's; remove $work/member$k and run again" >&2; exit 1; }
done
member_pid=()
# As with run.sh, a signal must reach the process group (Ctrl-C does): each tx-train then saves
# and its run.sh exits 130; this script waits for them all. The members start with SIGINT as
# it is by default, not ignored as bash leaves it for a background job, so that Ctrl-C during a
# member's set-up (before tx-train takes the signal) ends it too.
interrupted=0
trap 'interrupted=1' INT TERM
for k in $(seq 1 "$members"); do
  dir="$work/member$k"
  [ -f "$dir/scores.txt" ] && continue
  if [ "$k" -gt 1 ] && [ ! -f "$dir/model/vocab.spm" ]; then
    # Member 1 may end without one (an error) or be stopped, or have been done before (then
    # the file is there).
    while [ ! -f "$vocab" ] && [ "$interrupted" = 0 ] && [ -n "${member_pid[1]:-}" ] &&
      kill -0 "${member_pid[1]}" 2>/dev/null; do
      sleep 1 || true
    done
    if [ ! -f "$vocab" ] || [ "$interrupted" = 1 ]; then break; fi
    mkdir -p "$dir/model"
    cp "$vocab" "$dir/model/vocab.spm"
  fi
  [ "$interrupted" = 0 ] || break
  env --default-signal=INT "$here/run.sh" "$data" "$dir" "${flags[@]}" --cpu-threads "$threads" \
    --seed $(( members * (seed - 1) + k )) &
  member_pid[k]=$!
done
failed=0 stopped=0
for k in $(seq 1 "$members"); do
  [ -n "${member_pid[$k]:-}" ] || continue
  s=0
  wait "${member_pid[$k]}" || s=$?
  # A wait cut short by the trap's signal: wait again for the member to save and end.
  while kill -0 "${member_pid[$k]}" 2>/dev/null; do s=0; wait "${member_pid[$k]}" || s=$?; done
  case "$s" in
    0) ;;
    130) stopped=1 ;;  # run.sh's status for a training stopped by a signal, its checkpoint saved
    *) failed=$s; echo "ensemble.sh: member $k ($work/member$k) ended with status $s; its run.sh said why above" >&2 ;;
  esac
done
trap - INT TERM
[ "$failed" = 0 ] || exit "$failed"
if [ "$interrupted" = 1 ] || [ "$stopped" = 1 ]; then
  echo "ensemble.sh: stopped on a signal (members in training saved their checkpoints); run the same command again to go on" >&2
  exit 130
fi
for k in $(seq 1 "$members"); do
  [ -f "$work/member$k/scores.txt" ] || { echo "ensemble.sh: error: member $k has no scores.txt; run the same command again" >&2; exit 1; }
  cmp -s "$vocab" "$work/member$k/model/vocab.spm" ||
    { echo "ensemble.sh: error: member $k's vocabulary differs from member 1's; remove $work/member$k and run again" >&2; exit 1; }
done
trained=$(date +%s)
# The longest member's figure is the ensemble's training time (a member's counts all its
# calls, as run.sh's does).
longest=0
for k in $(seq 1 "$members"); do
  t=$(sed -n 's/^time: training \([0-9]*\)s.*/\1/p' "$work/member$k/scores.txt")
  [ "${t:-0}" -gt "$longest" ] && longest=$t
done

models=()
for k in $(seq 1 "$members"); do models+=("$work/member$k/model/averaged.safetensors"); done
for part in test2016 val; do
  "$bin/tx-translate" -m "${models[@]}" -v "$vocab" --beam-size "$beam" --normalize "$normalize" \
    --quiet < "$data/$part.en" > "$work/$part.ensemble.beam$beam.de"
done
translated=$(date +%s)
{
  printf '%-9s beam %-2s ' "averaged" "$beam"
  "$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet \
    < "$work/test2016.ensemble.beam$beam.de" | head -1
  printf '%-9s beam %-2s ' "val" "$beam"
  "$bin/tx-score" -r "$data/val.de" --metrics bleu --quiet < "$work/val.ensemble.beam$beam.de" \
    | head -1
  echo "chrF (ensemble of $members averaged members, beam $beam):"
  "$bin/tx-score" -r "$data/test2016.de" --metrics chrf --quiet < "$work/test2016.ensemble.beam$beam.de"
  echo "time: training ${longest}s (the longest of $members members side by side), ensemble translating $(( translated - trained ))s, on $(nproc) cores"
} | tee "$work/scores.txt.tmp"
mv "$work/scores.txt.tmp" "$work/scores.txt"
