#!/usr/bin/env bash
# A GPU session's checks in one call of the lent machine: the CUDA test cases, the Multi30k
# recipe trained on the GPU, test2016 translated on the GPU and the CPU, compute-sanitizer.
#
#   bench/gpu/device_check.sh PAYLOAD DATA_DIR OUT_DIR [TRAIN_SECONDS]
#
# PAYLOAD is a .tar.xz of bin/ (tx_tests and the four programs, built here with the CUDA
# backend) and lib/ (the shared libraries they need that the GPU machine lacks); cuBLAS and
# NCCL are taken from the machine's own CUDA. DATA_DIR holds Multi30k's train/val/test2016.
# Each phase has its own time limit and its own log in OUT_DIR; a phase that fails does not
# stop the next. The tests' compiled-in paths (TX_SOURCE_DIR, build/apps) are recreated under
# /work/main, the path they were built at.
set -u
payload="$1" data="$2" out="$3" train_s="${4:-170}"
root="$PWD"
data="$(cd "$data" && pwd)"
source "$(dirname "$0")/device_setup.sh"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  nvcc --version 2>/dev/null | tail -2
  grep -m1 'model name' /proc/cpuinfo; nproc
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  ldd "$bin/tx-train" /work/main/build/tests/tx_tests | grep 'not found'
} >/tmp/info.log 2>&1
say "info"; tee -a "$out/summary.txt" </tmp/info.log

cd /work/main
phase tests 150 build/tests/tx_tests "*tx::test::Cuda,[cuda]" --durations yes

work=/tmp/m30k tr=/tmp/translations
mkdir -p "$tr"
phase train "$train_s" "$bin/tx-train" --config examples/multi30k/config.json --device cuda \
  --train-sets "$data/train.en" "$data/train.de" --valid-sets "$data/val.en" "$data/val.de" \
  -m "$work/model"
model=$(ls -t "$work"/model/model.u*.safetensors "$work/model/model.safetensors" 2>/dev/null | head -1)
say "model: $model"; grep -E 'words/s|valid' "$out/train.log" | tail -n 6 >>"$out/summary.txt"

translate() {  # translate DEVICE BEAM: time, then BLEU
  local t0=$SECONDS
  "$bin/tx-translate" -m "$model" -v "$work/model/vocab.spm" --device "$1" --beam-size "$2" \
    --quiet <"$data/test2016.en" >"$tr/test2016.$1.beam$2.de" || return
  echo "$1 beam $2: $((SECONDS - t0)) s (bash SECONDS), $("$bin/tx-score" -r "$data/test2016.de" \
    --metrics bleu --quiet <"$tr/test2016.$1.beam$2.de" | head -1)"
}
translate_all() {
  for b in 5 1; do
    for d in cuda cpu; do
      TIMEFORMAT="$d beam $b wall %R s"; time translate "$d" "$b"
    done
    echo "beam $b: lines differing cuda vs cpu:" \
      "$(diff "$tr/test2016.cuda.beam$b.de" "$tr/test2016.cpu.beam$b.de" | grep -c '^<')"
  done
}
[ -n "$model" ] && phase translate 70 bash -c "$(declare -f translate translate_all); \
  bin=$bin model=$model work=$work data=$data tr=$tr; translate_all"
tar czf "$out/translations.tgz" -C "$tr" . "$work/model/train.log.jsonl" 2>/dev/null

if command -v compute-sanitizer >/dev/null; then
  phase sanitizer 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
    build/tests/tx_tests "*tx::test::Cuda"
fi
say "done"
