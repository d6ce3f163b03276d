#!/usr/bin/env bash
# Training per --precision on the Multi30k recipe's model: target tokens/s against fp32's and
# how far each precision's loss is from fp32's, measured in one run on one machine.
#
#   bench/precision/train.sh DATA_DIR [UPDATES=200] [DEVICE=cpu]
#
# PRECISIONS="fp32 bf16" runs only those (default: fp32 bf16 fp16; fp32 is the reference).
# EXTRA="..." adds tx-train flags after the recipe's, e.g. transformer-base's shape:
#   EXTRA="--d-model 512 --d-ff 2048 --heads 8 --enc-layers 6 --dec-layers 6"
# Each precision trains UPDATES updates from the same seed (the recipe's config, with
# inverse-sqrt for its linear schedule, which needs the run's end: the same warm-up and peak),
# logs every 20 updates and validates at the end. A precision the device refuses
# (bf16 on a CPU without AVX-512) is listed with its one-line refusal. fp16 on a CPU is
# emulated (fp32 GEMMs on rounded operands): its loss counts, its speed does not.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
. "$here/../common.sh"
data="${1:?usage: $0 DATA_DIR [UPDATES] [DEVICE]}"
updates="${2:-200}"
device="${3:-cpu}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
for f in train.en train.de val.en val.de; do
  [ -f "$data/$f" ] || { echo "train.sh: '$data/$f' is missing; give the Multi30k directory" >&2; exit 1; }
done
cpu="$(cpu_model)"
cpu+=" (family $(grep -m1 'cpu family' /proc/cpuinfo | grep -o '[0-9]*$'), model $(grep -m1 '^model\s' /proc/cpuinfo | grep -o '[0-9]*$'))"
if grep -q avx512_bf16 /proc/cpuinfo; then cpu+=", AVX512_BF16"; else cpu+=", no AVX512_BF16"; fi
echo "# $cpu, $(nproc) cores, device $device, $updates updates${EXTRA:+, $EXTRA}"
vocab="$work/vocab.spm"
precisions="${PRECISIONS:-fp32 bf16 fp16}"
for p in $precisions; do
  rm -rf "$work/$p"
  args=(--config "$root/examples/multi30k/config.json" --train-sets "$data/train.en" "$data/train.de"
        --valid-sets "$data/val.en" "$data/val.de" -m "$work/$p" --vocabs "$vocab" "$vocab"
        --device "$device" --precision "$p" --after-updates "$updates" --after-epochs 0
        --lr-schedule inverse-sqrt
        --disp-freq 20 --valid-freq "$updates" --save-freq "$updates" --keep-last 0)
  # shellcheck disable=SC2206  # EXTRA is a list of flags
  args+=(${EXTRA:-})
  if ! "$bin/tx-train" "${args[@]}" 2> "$work/$p.log"; then
    echo "$p: $(grep -m1 error "$work/$p.log")"
  fi
done
python3 - "$work" $precisions <<'PY'
import json, os, sys
work = sys.argv[1]
def read(p):
    path = os.path.join(work, p, "train.log.jsonl")
    if not os.path.exists(path): return None
    rows = [json.loads(l) for l in open(path)]
    train = [r for r in rows if r["type"] == "train"]
    valid = [r for r in rows if r["type"] == "valid"]
    # The first span holds the start-up; the rest give the rate.
    rate = sum(r["words_per_s"] for r in train[1:]) / max(1, len(train) - 1)
    return {"cost": [r["cost"] for r in train], "rate": rate,
            "ce": valid[-1]["cross-entropy"] if valid else float("nan"),
            "scale": train[-1].get("loss_scale")}
runs = {p: read(p) for p in sys.argv[2:]}
base = runs["fp32"]
print("| precision | target tokens/s | vs fp32 | largest cost difference vs fp32 | valid CE | loss scale |")
print("|---|---|---|---|---|---|")
for p, r in runs.items():
    if r is None:
        print(f"| {p} | failed (above) | | | | |"); continue
    diff = max(abs(a - b) / b for a, b in zip(r["cost"], base["cost"]))
    scale = "" if r["scale"] is None else f"{r['scale']:g}"
    print(f"| {p} | {r['rate']:,.0f} | {r['rate'] / base['rate']:.2f}x | {100 * diff:.2f}% | {r['ce']:.4f} | {scale} |")
PY
