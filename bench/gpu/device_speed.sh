#!/usr/bin/env bash
# A GPU session's second call: the Multi30k recipe trained again (is the GPU run-to-run
# deterministic?), translation speed on test2016 x 10 (GPU at several batch sizes, --int8,
# the machine's CPU), transformer-base training speed, and compute-sanitizer on what
# device_check.sh's time limit left out (memcheck) and on the shared-memory kernels (racecheck).
#
#   bench/gpu/device_speed.sh PAYLOAD DATA_DIR OUT_DIR
set -u
payload="$1" data="$2" out="$3"
root="$PWD"
data="$(cd "$data" && pwd)"
source "$(dirname "$0")/device_setup.sh"
cd /work/main

work=/tmp/m30k
phase train 70 "$bin/tx-train" --config examples/multi30k/config.json --device cuda \
  --train-sets "$data/train.en" "$data/train.de" --valid-sets "$data/val.en" "$data/val.de" \
  -m "$work/model"
model="$work/model/model.safetensors"

for i in 1 2 3 4 5 6 7 8 9 10; do cat "$data/test2016.en"; done >/tmp/test10k.en
speed() {  # speed NAME FLAGS...: translate test2016 x 10, print the wall time
  local name="$1" t0 t1
  shift
  t0=$(date +%s.%N)
  "$bin/tx-translate" -m "$model" -v "$work/model/vocab.spm" --quiet "$@" \
    </tmp/test10k.en >"/tmp/tr.$name" 2>"/tmp/tr.$name.err" || { echo "$name: failed"; cat "/tmp/tr.$name.err"; }
  t1=$(date +%s.%N)
  echo "$name ($*): $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s, $(wc -l <"/tmp/tr.$name") lines"
}
speeds() {
  speed cuda-b5 --device cuda --beam-size 5
  speed cuda-b5-mb32 --device cuda --beam-size 5 --mini-batch 32
  speed cuda-b5-t32k --device cuda --beam-size 5 --max-tokens 32768
  speed cuda-b1 --device cuda --beam-size 1
  speed cuda-b1-t32k --device cuda --beam-size 1 --max-tokens 32768
  speed cuda-b5-int8 --device cuda --beam-size 5 --int8
  speed cpu-b5 --device cpu --beam-size 5
  speed cpu-b1 --device cpu --beam-size 1
  head -1000 /tmp/tr.cuda-b5-int8 >/tmp/int8.1k
  echo "int8 cuda BLEU: $("$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet </tmp/int8.1k | head -1)"
  echo "int8 vs fp32 cuda lines differing: $(diff /tmp/tr.cuda-b5-int8 /tmp/tr.cuda-b5 | grep -c '^<')"
  echo "cuda b5 vs cpu b5 lines differing: $(diff /tmp/tr.cuda-b5 /tmp/tr.cpu-b5 | grep -c '^<')"
  echo "cuda b5 t32k vs mb32 lines differing: $(diff /tmp/tr.cuda-b5-t32k /tmp/tr.cuda-b5-mb32 | grep -c '^<')"
}
phase translate 110 bash -c "$(declare -f speed speeds); bin=$bin model=$model work=$work data=$data; speeds"

phase base 80 "$bin/tx-train" --task transformer-base --device cuda --vocabs "$work/model/vocab.spm" \
  --train-sets "$data/train.en" "$data/train.de" --max-tokens 8192 --after-updates 400 \
  --disp-freq 50 -m /tmp/base

phase memcheck 80 compute-sanitizer --tool memcheck --error-exitcode 9 build/tests/tx_tests \
  -f "$root/.devcarry/memcheck.txt"
phase racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 build/tests/tx_tests \
  -f "$root/.devcarry/racecheck.txt"
tar czf "$out/translations.tgz" -C /tmp tr.cuda-b5 tr.cpu-b5 tr.cuda-b5-int8 m30k/model/train.log.jsonl 2>/dev/null
say "done"
