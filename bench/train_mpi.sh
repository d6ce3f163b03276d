#!/usr/bin/env bash
# Data-parallel training speed on the Multi30k configuration (examples/multi30k/config.json):
# target tokens/s of one process with 2 threads (--optimizer-delay 2) against mpirun -np 2
# with 1 thread per rank (the same updates of 2 batches), and the share of the step time spent
# in the gradient all-reduce. Not a test (ctest does not run it); timings on a shared machine
# vary by 15% or more from run to run: compare the two lines of one run.
#
# Usage: bench/train_mpi.sh [DATA_DIR] [UPDATES] [BUILD_DIR]
# (OMP_WAIT_POLICY=PASSIVE from the environment suits a shared machine, as in the recipe.)
#   DATA_DIR   Multi30k with train.en and train.de (default ../shared/data/multi30k)
#   UPDATES    updates per configuration (default 60; the first display span is warm-up)
#   BUILD_DIR  where tx-train was built, with MPI (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-../shared/data/multi30k}"
updates="${2:-60}"
build="${3:-build}"
train="$build/apps/tx-train"

skip() {
  echo "SKIPPED: $*" >&2
  exit 0
}
[ -f "$data/train.en" ] && [ -f "$data/train.de" ] || skip "no Multi30k in '$data' (train.en, train.de)"
[ -x "$train" ] || skip "no $train; build tx first (scripts/test or scripts/deps.sh's tx_build)"
command -v mpirun >/dev/null || skip "mpirun is missing (apt-get install openmpi-bin)"
command -v python3 >/dev/null || skip "python3 is missing (it reads train.log.jsonl)"

work="$(mktemp -d "${TMPDIR:-/tmp}/tx_bench_mpi.XXXXXX")"
trap 'rm -rf "$work"' EXIT
disp=10
flags=(--config examples/multi30k/config.json --train-sets "$data/train.en" "$data/train.de"
       --vocabs "$work/vocab.spm" --disp-freq "$disp"
       --save-freq 1000000 --keep-last 0 --quiet)

# The vocabulary first, so neither timed run trains it.
"$train" "${flags[@]}" --model "$work/vocab_run" --after-updates 1 --cpu-threads 2

# Other work on the machine skews the comparison: the load average says how much there was.
load() { echo "load average $(cut -d' ' -f1-3 /proc/loadavg) $*" >&2; }
echo "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-(unset: spinning)}" >&2
load "before 1 process x 2 threads"
echo "1 process x 2 threads, --optimizer-delay 2 ..." >&2
OMP_NUM_THREADS=2 "$train" "${flags[@]}" --after-updates "$updates" --model "$work/one" \
  --cpu-threads 2 --optimizer-delay 2
load "after it"
echo "mpirun -np 2 x 1 thread ..." >&2
OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to core -np 2 "$train" "${flags[@]}" --after-updates "$updates" \
  --model "$work/two" --cpu-threads 1

load "after it"

# The all-reduce alone (no waiting for the slower rank), on a buffer of the model's size.
numel=$(python3 -c '
import json, math, struct, sys
with open(sys.argv[1], "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
print(sum(math.prod(t["shape"]) for k, t in header.items() if k != "__metadata__") + 2)' "$work/two/model.safetensors")
alone=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe --bind-to core -np 2 "$build/bench/allreduce" --numel "$numel")

ALONE="$alone" python3 - "$work/one/train.log.jsonl" "$work/two/train.log.jsonl" <<'EOF'
import json, os, sys

def figures(path):
    lines = [j for j in map(json.loads, open(path)) if j["type"] == "train"]
    spans = lines[1:]  # the first span is warm-up (first allocations, oneDNN primitives)
    secs = sum(j["time_s"] for j in spans)
    tokens = sum(j["words_per_s"] * j["time_s"] for j in spans)
    # Time in the all-reduce call: the transfer and any wait for the slower rank's batch.
    reduce = sum(j.get("allreduce_s", 0.0) for j in spans)
    updates = lines[-1]["update"] - lines[0]["update"]
    return tokens / secs, secs / updates, reduce / secs

one, two = figures(sys.argv[1]), figures(sys.argv[2])
print("configuration                     target tokens/s   s/update   all-reduce share")
print(f"1 process x 2 threads (delay 2)   {one[0]:15,.0f}   {one[1]:8.3f}   -")
print(f"2 ranks x 1 thread (mpirun)       {two[0]:15,.0f}   {two[1]:8.3f}   {two[2]:.1%}")
print(f"ratio 2 ranks / 1 process         {two[0] / one[0]:15.2f}")
alone = os.environ["ALONE"]
ms = float(alone.split(" ms per all-reduce")[0].rsplit(" ", 1)[1])
print(f"the all-reduce alone: {alone.split(': ', 1)[1]}")
print(f"  = {ms / 1e3 / two[1]:.1%} of a 2-rank update; the rest of the share above is waiting")
print("    for the rank with the longer batch")
EOF
