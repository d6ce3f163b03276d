#!/usr/bin/env bash
# --precision on a GPU, in one run: the Multi30k recipe trained in fp32, bf16 and fp16 (its
# full 21 epochs), each model's validation cross-entropy and test2016 BLEU (beam 5) at its own
# precision and the fp32 model's at each; tx-translate speed per precision on test2016 x 10
# with GPU-sized batches; transformer-base training target tokens/s per precision at
# --max-tokens 32768 (gpu-check measures 8192).
#
#   bench/precision/gpu.sh DATA_DIR VOCAB OUT_DIR      (after bench/gpu/device_setup.sh)
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${TX_BIN:-$root/build/apps}"
data="$1" vocab="$2" out="$3"
mkdir -p "$out"
say() { echo "$*" | tee -a "$out/summary.txt"; }
now() { date +%s.%N; }
say "# $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
for p in fp32 bf16 fp16; do
  t0=$(now)
  "$bin/tx-train" --config "$root/examples/multi30k/config.json" --device cuda --precision $p \
    --vocabs "$vocab" "$vocab" -m "$out/m-$p" --train-sets "$data/train.en" "$data/train.de" \
    --valid-sets "$data/val.en" "$data/val.de" 2>"$out/train-$p.log"
  rc=$?
  t1=$(now)
  say "recipe $p: rc $rc, $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s, last validation:" \
    "$(grep 'cross-entropy :' "$out/train-$p.log" | tail -1 | grep -o 'Up\. [0-9,]* : cross-entropy : [0-9.]*')," \
    "$(grep -o '[0-9,]* words/s' "$out/train-$p.log" | tail -1)"
done
bleu() { "$bin/tx-score" -r "$data/test2016.de" --metrics bleu --quiet <"$1" | grep -o '= [0-9.]*' | head -1; }
for m in fp32 bf16 fp16; do
  for p in fp32 bf16 fp16; do
    [ "$m" = fp32 ] || [ "$m" = "$p" ] || continue
    "$bin/tx-translate" -m "$out/m-$m/model.safetensors" -v "$vocab" --device cuda --precision $p \
      --beam-size 5 --quiet <"$data/test2016.en" >"$out/t.$m.$p" 2>>"$out/translate.log"
    say "test2016 BLEU, model trained $m, translated $p: $(bleu "$out/t.$m.$p")," \
      "lines differing from fp32's: $(diff "$out/t.$m.$p" "$out/t.fp32.fp32" | grep -c '^<')"
  done
done
for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$data/test2016.en"; done >"$out/test10k.en"
for flags in "--beam-size 5" "--beam-size 5 --max-tokens 32768" "--beam-size 1 --max-tokens 32768"; do
  for p in fp32 tf32 bf16 fp16; do
    case $p in tf32) pf=(--tf32) ;; *) pf=(--precision $p) ;; esac
    t0=$(now)
    # shellcheck disable=SC2086
    "$bin/tx-translate" -m "$out/m-fp32/model.safetensors" -v "$vocab" --device cuda "${pf[@]}" \
      $flags --quiet <"$out/test10k.en" >/dev/null 2>>"$out/translate.log"
    say "translate test2016 x 10, $flags, $p: $(awk "BEGIN{printf \"%.2f\", $(now) - $t0}") s"
  done
done
for p in fp32 tf32 bf16 fp16; do
  case $p in tf32) pf=(--tf32) ;; *) pf=(--precision $p) ;; esac
  timeout 60 "$bin/tx-train" --task transformer-base --device cuda "${pf[@]}" --vocabs "$vocab" \
    --train-sets "$data/train.en" "$data/train.de" --max-tokens 32768 --after-updates 45 \
    --disp-freq 15 -m "$out/base-$p" 2>"$out/base-$p.log"
  say "transformer-base $p, --max-tokens 32768: rc $?, updates 30-45:" \
    "$(grep -o '[0-9,]* words/s' "$out/base-$p.log" | tail -1)"
done
