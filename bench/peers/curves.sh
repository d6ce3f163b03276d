#!/usr/bin/env bash
# tx-train's validation cross-entropy against PyTorch's on the Multi30k recipe's model, run
# one after the other on the same cores: an independent reference for a learning curve (does a
# deeper post-norm encoder lag in PyTorch too?).
#
#   bench/peers/curves.sh OUT UPDATES VOCAB.spm NAME:ENC:DEC:DROPOUT ...
#
# Each variant trains ENC + DEC layers of the recipe's sizes (d_model 256, d_ff 1,024, 4 heads,
# tied embeddings) with DROPOUT on the sublayer outputs, the embeddings, the attention
# probabilities and inside the feed-forward layer (PyTorch's layers have one rate for all
# three), fp32, seed 1, the recipe's linear schedule to its 36 epochs (2e-3 after 800 updates,
# to 0 at update 4,464), stopped after UPDATES updates: tx-train (examples/multi30k/config.json,
# without depth scaling) and bench/peers/torch_transformer.py (--init tx: tx's initialisation,
# tx's batch rule).
# PyTorch reads the sizes and rates from config.json too; TOTAL moves the schedule's end.
# Validation every 250 updates. Prints one line per variant and engine, and OUT/curves.txt.
# DATA (default ../shared/data/multi30k), TX_BIN (build/apps), PYTHON (a python3 with torch and
# sentencepiece; default /usr/bin/python3, where Debian's python3-torch lives). Debian's torch
# multiplies through the system BLAS: with the reference libblas3 an update takes ~60 s on a
# 2-core Zen 3, with libopenblas0-pthread installed 3-4 s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:?usage: $0 OUT UPDATES VOCAB.spm NAME:ENC:DEC:DROPOUT ...}" updates="$2" vocab="$3"
shift 3
data="${DATA:-$root/../shared/data/multi30k}" bin="${TX_BIN:-$root/build/apps}"
py="${PYTHON:-/usr/bin/python3}"
cfg="$root/examples/multi30k/config.json"
# PyTorch takes the recipe's sizes and rates from the same file as tx-train; both end the linear
# schedule at update TOTAL (the 36 epochs' 4,464).
read -r d_model d_ff heads smoothing rate warmup max_tokens <<< "$("$py" -c '
import json, sys
c = json.load(open(sys.argv[1]))
print(*(c[k] for k in ("d-model", "d-ff", "heads", "label-smoothing", "learn-rate", "lr-warmup",
                       "max-tokens")))' "$cfg")"
total="${TOTAL:-4464}"
mkdir -p "$out"
: > "$out/curves.txt"
for v in "$@"; do
  IFS=: read -r name enc dec p <<< "$v"
  m="$out/tx.$name"
  rm -rf "$m"
  # tx-train runs the whole schedule's rate; it is stopped (SIGTERM saves) once update UPDATES
  # has been validated.
  "$bin/tx-train" --config "$cfg" --after-minutes 0 --after-updates "$total" \
    --enc-layers "$enc" --dec-layers "$dec" --dropout "$p" --attention-dropout "$p" \
    --relu-dropout "$p" --transformer-depth-scaling=false --valid-freq 250 --save-freq 100000 \
    --cpu-threads 2 \
    -v "$vocab" "$vocab" --train-sets "$data/train.en" "$data/train.de" \
    --valid-sets "$data/val.en" "$data/val.de" -m "$m" 2> "$out/tx.$name.log" &
  pid=$!
  until grep -q "Up. $(sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<< "$updates") : cross-entropy" "$out/tx.$name.log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 2
  done
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  tx_curve=$(grep -o 'Up\. [0-9,]* : cross-entropy : [0-9.]*' "$out/tx.$name.log" |
    awk '{gsub(",", "", $2); printf "%s %s / ", $2, $6}')
  echo "$name tx    (enc $enc, dec $dec, dropout $p): $tx_curve" | tee -a "$out/curves.txt"
  "$py" "$here/torch_transformer.py" --spm "$vocab" --src "$data/train.en" \
    --tgt "$data/train.de" --updates "$updates" --warmup-updates 0 --threads 2 \
    --d-model "$d_model" --d-ff "$d_ff" --heads "$heads" --max-tokens "$max_tokens" \
    --enc-layers "$enc" --dec-layers "$dec" --dropout "$p" --label-smoothing "$smoothing" \
    --learn-rate "$rate" --lr-warmup "$warmup" --lr-schedule linear --after-updates "$total" --init tx \
    --valid-src "$data/val.en" --valid-tgt "$data/val.de" --valid-freq 250 \
    > "$out/torch.$name.json" 2> "$out/torch.$name.log"
  torch_curve=$("$py" -c "import json,sys; print(' / '.join(f'{u} {c:.4f}' for u, c in json.load(open(sys.argv[1]))['valid_cross_entropy']))" "$out/torch.$name.json")
  echo "$name torch (enc $enc, dec $dec, dropout $p): $torch_curve" | tee -a "$out/curves.txt"
done
