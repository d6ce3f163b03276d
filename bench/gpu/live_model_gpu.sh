#!/usr/bin/env bash
# On the lent GPU machine: issue 23's live model (6+6, d512, 8 heads, d_ff 2048, Marian's
# layout: swish, [sin | cos] positions, output bias, tied embeddings, Marian's ids) trained from
# scratch by tx-train --device cuda on Multi30k with the Marian vocabulary, in one or more
# variants side by side on the one GPU (a d512 model at 4,096 tokens a batch leaves it far from
# full). The variant with the best validation BLEU comes back as int8 pieces (int8_pieces.py;
# one d512 model is all a call returns), every variant's BLEU in run.txt, the logs in logs.tgz.
# The CUDA and oracle test cases run beside the training.
#
#   bench/gpu/live_model_gpu.sh PAYLOAD DATA_DIR VOCAB OUT_DIR [VARIANT...]
#
# A VARIANT is NAME:FLAGS, tx-train flags of its own; of --after-epochs, --learn-rate,
# --lr-warmup, --dropout and --valid-freq, those it leaves out take the defaults below
# (tx-train refuses a flag given twice), e.g. "a:" "b:--learn-rate 0.0003 --dropout 0.2";
# none: one run, "a:". Defaults: 40 epochs, a linear schedule peaking at 5e-4 after 800
# updates, dropout 0.3 (attention and ReLU 0.1), label smoothing 0.1, 4,096 tokens, TF32 GEMMs
# (--tf32; the weights stay fp32), validation BLEU (beam 5) and cross-entropy every 500 updates.
# A variant whose FLAGS hold @kd trains on a teacher's translations of train.en (TEACHER=1 or KD,
# below). A variant whose model folder is still there (a second call on the warm machine)
# resumes from its checkpoint; a larger --after-epochs goes on along the new schedule.
#
# Here first: bench/gpu/pack.sh, then copy the live run's vocab.spm (WORK/M of
# bench/peers/live_model.sh) into .devcarry/. The device call: carry .devcarry, run this with
# $OUT, timeout_s about 480. TRAIN_SECONDS (default 330) caps the training: tx-train is then
# stopped by SIGTERM and saves. TRAIN_TARGET (default DATA_DIR/train.de): the German side to
# train on. Back here: `int8_pieces.py unpack OUT/pieces model.safetensors`, tx_to_marian.py
# with WORK/M/model.npz as the template, and `marian.py compare`. DEVICE=cpu PYTHON=... runs it
# here as a smoke test (tiny --valid-freq and TRAIN_SECONDS).
set -u
payload="$1" data="$2" vocab="$3" out="$4"
shift 4
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=("a:")
root="$PWD"
data="$(cd "$data" && pwd)"
vocab="$(cd "$(dirname "$vocab")" && pwd)/$(basename "$vocab")"
device="${DEVICE:-cuda}"  # cpu: a smoke test of this script here, with build/ as it is
source "$(dirname "$0")/device_setup.sh"
source "$root/bench/peers/live_arch.sh"
bin=/work/main/build/apps
export OMP_WAIT_POLICY=passive
tf32=(--tf32) py="${PYTHON:-python3}"
[ "$device" = cuda ] || tf32=()
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$out/run.txt"

if [ -z "${TEACHER:-}${KD:-}" ] && [[ " ${variants[*]} " == *" @kd "* || " ${variants[*]} " == *":@kd "* ]]; then
  echo "live_model_gpu.sh: a variant trains on @kd; set TEACHER=1 or KD=FILE" | tee -a "$out/run.txt" && exit 2
fi

(cd /work/main && timeout -k 5 150 build/tests/tx_tests "*tx::test::Cuda,[cuda],[oracle]" \
  > "$out/tests.log" 2>&1; echo "[tests rc $?]" >> "$out/tests.log") &
tests=$!

# TEACHER=1: sequence-level distillation. The recipe's model (examples/multi30k/config.json,
# its own vocabulary learned on the fly) is trained here first and translates train.en (beam 5,
# --normalize 1.8, as the recipe decodes); a variant whose FLAGS hold @kd trains on those
# translations. TEACHER_FLAGS adds tx-train flags (a smoke test's --after-updates). KD=FILE
# instead: train.en's translations made beforehand (e.g. here, by a recipe model on the CPU),
# carried in .devcarry; no teacher is trained.
kd=""
if [ -n "${KD:-}" ]; then
  kd="$(cd "$(dirname "$KD")" && pwd)/$(basename "$KD")"
  [ "$(wc -l < "$kd")" = "$(wc -l < "$data/train.en")" ] || {
    echo "KD: $kd does not have train.en's $(wc -l < "$data/train.en") lines" | tee -a "$out/run.txt"; exit 2; }
elif [ -n "${TEACHER:-}" ]; then
  t=/tmp/teacher kd=/tmp/train.kd.de
  # shellcheck disable=SC2086  # TEACHER_FLAGS is a list of words
  [ -f "$t/model.safetensors" ] || timeout -s TERM "${TEACHER_SECONDS:-150}" "$bin/tx-train" \
    --config "$root/examples/multi30k/config.json" --device "$device" "${tf32[@]}" \
    --cpu-threads 8 --train-sets "$data/train.en" "$data/train.de" \
    --valid-sets "$data/val.en" "$data/val.de" -m "$t" ${TEACHER_FLAGS:-} 2> "$out/teacher.log"
  [ -f "$t/model.safetensors" ] || { echo "teacher: no model; see teacher.log" >> "$out/run.txt";
    tar czf "$out/logs.tgz" -C "$out" teacher.log tests.log; cat "$out/run.txt"; exit 1; }
  for f in test2016 train; do
    "$bin/tx-translate" --device "$device" -m "$t/model.safetensors" -v "$t/vocab.spm" \
      --beam-size 5 --normalize 1.8 --quiet < "$data/$f.en" > "/tmp/$f.kd.de"
    echo "teacher, $f: $("$bin/tx-score" -r "$data/$f.de" --metrics bleu --quiet \
      < "/tmp/$f.kd.de")" >> "$out/run.txt"
  done
fi

pids=()
for v in "${variants[@]}"; do
  name="${v%%:*}" flags="${v#*:}" target="${TRAIN_TARGET:-$data/train.de}"
  m="/tmp/live.$name"
  if [[ " $flags " == *" @kd "* ]]; then
    flags="${flags//@kd/}" target="$kd"
  fi
  for d in "--after-epochs 40" "--learn-rate 0.0005" "--lr-warmup 800" "--dropout 0.3" \
    "--valid-freq 500"; do
    [[ " $flags " == *" ${d% *} "* ]] || flags+=" $d"
  done
  # shellcheck disable=SC2086  # FLAGS is a list of words
  timeout -s TERM "${TRAIN_SECONDS:-330}" "$bin/tx-train" --device "$device" "${tf32[@]}" --cpu-threads 4 \
    -v "$vocab" "$vocab" --train-sets "$data/train.en" "$target" \
    --valid-sets "$data/val.en" "$data/val.de" -m "$m" "${live_arch[@]}" "${live_train[@]}" \
    --attention-dropout 0.1 --relu-dropout 0.1 --valid-metrics bleu cross-entropy --beam-size 5 \
    --save-freq 500 --disp-freq 100 $flags \
    2> "$out/train.$name.log" &
  echo "$flags (trains on $(basename "$target"))" > "$out/flags.$name.txt"
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  echo "${variants[$i]%%:*}: tx-train exit $? (124: stopped at TRAIN_SECONDS, saved)" >> "$out/run.txt"
done

# Each variant's best validation BLEU and its model's test2016 BLEU; the best variant's model
# goes back.
best="" best_bleu=-1
: > /tmp/models.txt
for v in "${variants[@]}"; do
  name="${v%%:*}" m="/tmp/live.$name"
  cp "$m/train.log.jsonl" "$out/train.$name.jsonl" 2>/dev/null
  model="$m/model.best-bleu.safetensors"
  [ -f "$model" ] || model="$m/model.safetensors"
  vb=$("$py" -c "import json,sys; print(max([json.loads(l).get('bleu',-1) for l in open(sys.argv[1]) if '\"valid\"' in l] or [-1]))" "$m/train.log.jsonl" || echo -1)
  "$bin/tx-translate" --device "$device" -m "$model" --beam-size 5 --quiet \
    < "$data/test2016.en" > "$out/test2016.$name.de"
  tb=$("$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet < "$out/test2016.$name.de")
  echo "$name [$(cat "$out/flags.$name.txt")]: best val BLEU $vb ($(basename "$model")), test2016 $tb" >> "$out/run.txt"
  echo "$model" >> /tmp/models.txt
  if awk "BEGIN{exit !($vb > $best_bleu)}"; then best="$model" best_bleu="$vb"; fi
done
# A second call on the still-warm machine can fetch another one: int8_pieces.py pack it.
grep -vx "$best" /tmp/models.txt > /tmp/others.txt
echo "returned: $best" >> "$out/run.txt"
"$py" "$root/bench/gpu/int8_pieces.py" pack "$best" "$out/pieces" >> "$out/run.txt"
wait "$tests"
grep -E '^(All tests passed|test cases:)|\[tests rc' "$out/tests.log" >> "$out/run.txt"
echo "skipped: $(grep -c 'SKIPPED:' "$out/tests.log")" >> "$out/run.txt"
# The tool returns at most 8 files: run.txt, the pieces (4 and their index) and one archive.
cp "$out/run.txt" /tmp/run.txt
(cd "$out" && tar czf /tmp/logs.tgz --exclude pieces . && find . -maxdepth 1 -type f -delete)
mv /tmp/logs.tgz /tmp/run.txt "$out/"
cat "$out/run.txt"
