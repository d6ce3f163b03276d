#!/usr/bin/env bash
# The OPUS-MT-shaped model of issue 23's live comparison (6+6, d512, 8 heads, d_ff 2048, swish,
# post-norm, tied embeddings, one joint 8k SentencePiece vocabulary, Multi30k en->de):
# initialised by Marian, trained by tx in Marian's layout, written back as a Marian model.npz.
#
#   bench/peers/live_model.sh WORK [EPOCHS=16] [LEARN_RATE=0.0008]
#
# 1. WORK/M: `marian.py train --init` (pymarian: the vocabulary and the initial weights, ~2 min;
#    INIT=tx trains from tx's initialisation instead, WORK/M then gives the vocabulary and the
#    template of step 3);
# 2. WORK/FT: tx-train from WORK/M/model.npz, the linear schedule to EPOCHS epochs (peak
#    LEARN_RATE after WARMUP (800) warm-up updates, DROPOUT 0.3, ATTENTION_DROPOUT and
#    RELU_DROPOUT 0.1, label smoothing 0.1, 4,096 padded tokens a batch, clip 5); a run resumed
#    with other EPOCHS or LEARN_RATE goes on from its update on the new line. (The first run,
#    at dropout 0.1 with no attention or ReLU dropout and 250 warm-up updates, overfitted:
#    README.md);
#    started again with the same WORK it resumes from its last checkpoint, so it can span
#    sessions (about 5.5 s an update on 2 cores, 124 updates an epoch); TRAIN_TARGET (default
#    DATA/train.de) is the German side to train on, e.g. a distillation's (bench/peers/README.md);
#    TRAIN_FLAGS adds tx-train flags, e.g. INIT=tx TRAIN_FLAGS=--transformer-depth-scaling
#    (tx-train refuses it with INIT=marian: the weights then come from Marian);
# 3. WORK/LIVE: model.npz (tx_to_marian.py, WORK/M's as the template) and vocab.spm, and the
#    test2016 BLEU of tx-translate on it (beam 5), ready for
#    `marian.py compare WORK/LIVE [--hf-dir WORK/hf --make-hf]`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
py="${PYTHON:-$root/bench/.venv/bin/python}"
data="${DATA:-$root/../shared/data/multi30k}"
work="${1:?usage: $0 WORK [EPOCHS] [LEARN_RATE]}"
epochs="${2:-16}"
lr="${3:-0.0008}"
mkdir -p "$work"
[ -f "$work/M/model.npz" ] || "$py" "$here/marian.py" train "$work/M" --init
source "$here/live_arch.sh"
case "${INIT:-marian}" in
  marian) init=(--pretrained-model "$work/M/model.npz") ;;
  tx) init=("${live_arch[@]}") ;;
  *) echo "live_model.sh: error: INIT is '$INIT'; give marian or tx" >&2 && exit 2 ;;
esac
read -r -a extra <<< "${TRAIN_FLAGS:-}"
"$bin/tx-train" "${init[@]}" -v "$work/M/vocab.spm" "$work/M/vocab.spm" \
  --train-sets "$data/train.en" "${TRAIN_TARGET:-$data/train.de}" --valid-sets "$data/val.en" "$data/val.de" \
  -m "$work/FT" "${live_train[@]}" --after-epochs "$epochs" --learn-rate "$lr" \
  --lr-warmup "${WARMUP:-800}" --dropout "${DROPOUT:-0.3}" \
  --attention-dropout "${ATTENTION_DROPOUT:-0.1}" --relu-dropout "${RELU_DROPOUT:-0.1}" \
  --valid-freq 250 --save-freq 124 --disp-freq 50 ${extra[@]+"${extra[@]}"}
mkdir -p "$work/LIVE"
"$py" "$here/tx_to_marian.py" "$work/FT/model.safetensors" "$work/M/model.npz" "$work/LIVE/model.npz"
cp "$work/M/vocab.spm" "$work/LIVE/vocab.spm"
"$bin/tx-translate" -m "$work/LIVE/model.npz" -v "$work/LIVE/vocab.spm" --beam-size 5 --quiet \
  < "$data/test2016.en" > "$work/LIVE/test2016.tx.de"
echo "test2016 BLEU of $work/LIVE/model.npz (tx-translate, beam 5):"
"$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet < "$work/LIVE/test2016.tx.de"
