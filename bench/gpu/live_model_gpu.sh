#!/usr/bin/env bash
# On the lent GPU machine: issue 23's live model (6+6, d512, 8 heads, d_ff 2048, Marian's
# layout: swish, [sin | cos] positions, output bias, tied embeddings, Marian's ids) trained from
# scratch by tx-train --device cuda on Multi30k with the Marian vocabulary, its test2016 BLEU,
# and the model returned as int8 pieces (int8_pieces.py).
#
#   bench/gpu/live_model_gpu.sh PAYLOAD DATA_DIR VOCAB OUT_DIR
#
# Here first: bench/gpu/pack.sh, then copy the live run's vocab.spm (WORK/M/vocab.spm of
# bench/peers/live_model.sh) into .devcarry/. The device call: carry .devcarry, run this with
# $OUT, timeout_s about 540. TRAIN_SECONDS (default 360) caps the training: tx-train is then
# stopped by SIGTERM and saves. Back here: `int8_pieces.py unpack OUT model.safetensors`,
# tx_to_marian.py with WORK/M/model.npz as the template, and `marian.py compare`.
# TRAIN_TARGET (default DATA_DIR/train.de): the German side to train on, e.g. the recipe model's
# translations of train.en (sequence-level distillation, bench/gpu/README.md).
set -u
payload="$1" data="$2" vocab="$3" out="$4"
root="$PWD"
data="$(cd "$data" && pwd)"
vocab="$(cd "$(dirname "$vocab")" && pwd)/$(basename "$vocab")"
source "$(dirname "$0")/device_setup.sh"
source "$root/bench/peers/live_arch.sh"
bin=/work/main/build/apps
m=/tmp/live
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/run.txt"
timeout -s TERM "${TRAIN_SECONDS:-360}" "$bin/tx-train" --device cuda -v "$vocab" "$vocab" \
  --train-sets "$data/train.en" "${TRAIN_TARGET:-$data/train.de}" --valid-sets "$data/val.en" "$data/val.de" \
  -m "$m" "${live_arch[@]}" \
  --after-epochs "${EPOCHS:-40}" --lr-schedule linear --learn-rate "${LEARN_RATE:-0.0005}" \
  --lr-warmup "${WARMUP:-800}" --clip-norm 5 --dropout "${DROPOUT:-0.3}" \
  --attention-dropout "${ATTENTION_DROPOUT:-0.1}" --relu-dropout "${RELU_DROPOUT:-0.1}" \
  --label-smoothing 0.1 --max-tokens "${MAX_TOKENS:-4096}" --valid-freq 500 --save-freq 500 \
  --early-stopping 0 --disp-freq 100 --seed 1 2> "$out/train.log"
echo "tx-train exit $?" >> "$out/run.txt"
tail -3 "$out/train.log" >> "$out/run.txt"
"$bin/tx-translate" --device cuda -m "$m/model.safetensors" --beam-size 5 --quiet \
  < "$data/test2016.en" > /tmp/test2016.de
"$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet < /tmp/test2016.de \
  >> "$out/run.txt"
python3 "$root/bench/gpu/int8_pieces.py" pack "$m/model.safetensors" "$out/pieces" \
  >> "$out/run.txt"
cat "$out/run.txt"
