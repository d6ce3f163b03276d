"""tx-translate against Marian and CTranslate2 on a Marian model: speed, BLEU, identical lines.

train OUT_DIR: trains an OPUS-MT-shaped Marian transformer (pymarian, Marian's own trainer) on
Multi30k en->de: post-norm (`--transformer-postprocess dan`), swish, `--tied-embeddings-all`,
one joint SentencePiece vocabulary that Marian trains on the fly (OUT_DIR/vocab.spm), dropout
and label smoothing 0.1, Adam with warm-up and inverse-sqrt decay, 4,000 target words per
update, cross-entropy validation on val (no early stopping), `--seed 1`. Writes model.npz,
model.npz.decoder.yml, train.log and valid.log, then decodes test2016 with `pymarian decode`
(beam 5, Marian's defaults otherwise) and prints its BLEU (also in OUT_DIR/train.json).
The defaults (d512, 6+6 layers, 4 epochs of ~100 updates) are meant for 1-2 hours on 2 cores:
one update took 47 s at --threads 1 on a shared 2-core machine (89 target words/s), 5.8 GB.

compare MODEL_DIR: MODEL_DIR holds model.npz and its vocabularies: vocab.spm (as `train`
writes), or those model.npz.decoder.yml / decoder.yml names (.yml ones need source.spm and
target.spm beside them, to segment the input and join the output). At each beam x batch
setting it runs, one after the other: `pymarian decode` (Marian's CLI; the Python start-up
inside its time is printed once), `tx-translate` (Marian's search rule, automatic for a Marian
model) and CTranslate2 float32 (ctranslate2's own MarianConverter; cached in
MODEL_DIR/ct2-float32), all with marian-decoder's defaults: `--normalize 0` (length_penalty=0)
and at most 3 x (source tokens + 1) output tokens. marian-decoder applies that limit to the
batch's longest source, tx to each sentence's own, CTranslate2 (one limit) to the longest
line's: lines that reach it can differ at batch > 1. Times include loading the model;
--rounds N alternates the engines N times and reports medians. Printed: sentences/s, target
tokens/s (target SentencePiece pieces, eos not counted), BLEU (sacreBLEU, cased, 13a), % of
lines identical to Marian's, tx's speed over each engine's (tx/this); one JSON line per setting
to stdout, or appended to --json FILE. Marian's --cpu-threads T runs T workers with one core
and its own batches each; tx and CTranslate2 (intra_threads) put T threads on every batch.
--int8: `tx-translate --int8` against CTranslate2 int8 (quantization="int8",
MODEL_DIR/ct2-int8) at --int8-settings; identical lines still against Marian float32.
--ct2-marian-positions: ctranslate2's converter builds the position table as 10000^(-2i/d),
Marian as exp(-i ln(10^4) / (d/2 - 1)); this gives the CTranslate2 model Marian's table
(MODEL_DIR/ct2-*-marianpos), so that identical lines measure the search alone.
--hf-dir HF_DIR: the model as a Hugging Face MarianMTModel directory; --make-hf first writes it
with transformers' own converter as tests/fixtures/marian/make.py does (float32, every trailing
NUL of special:model.yml stripped, max_position_embeddings raised to 512). The converter needs
the OPUS-MT layout (source.spm, target.spm, a *vocab.yml, decoder.yml); a model with one
joint vocab.spm (as `train` writes) is staged in that layout first (both .spm files copies of
it, the .yml its pieces under their SentencePiece ids, which Marian uses). Then
`tx-translate -m HF_DIR` (generate()'s rule, --normalize 1, at most 510 tokens + eos) against
`model.generate` (length_penalty 1.0, early_stopping False, max_length 512), greedy and beam 5,
on the first --hf-lines lines, in padded batches of --hf-batch (its time excludes loading).
--settings "" runs the Hugging Face part alone.

Usage: marian.py train OUT_DIR [--epochs 4] [--threads 2] [--dim 512 --depth 6 --heads 8
                   --ffn 2048 --vocab-size 8000] [--valid-freq 200u]
       marian.py compare MODEL_DIR [--src F --ref F --lines 1000] [--threads 2]
                   [--settings 5x32,4x32,1x32,5x1] [--rounds 1] [--int8 [--int8-settings 5x32]]
                   [--ct2-marian-positions] [--tx-bin build/apps/tx-translate] [--json FILE]
                   [--no-marian] [--hf-dir HF_DIR [--make-hf] [--hf-lines 200] [--hf-batch 1]]
Run it with bench/.venv/bin/python (pymarian, ctranslate2, transformers, torch, sacrebleu).
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Debian's numpy and torch multiply through OpenBLAS, whose own threads then fight torch's for
# the cores: generate() at beam 5 ran 3x slower on 2 cores. Read when OpenBLAS loads (numpy).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import sacrebleu
import sentencepiece as spm
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
MARIAN = os.path.join(os.path.dirname(sys.executable), "pymarian")  # `pymarian [train|decode]`


def read_lines(path, n=None):
    return open(path, encoding="utf-8").read().splitlines()[:n]


def bleu(out, ref):
    return sacrebleu.corpus_bleu(out, [ref]).score


def marian_decode(npz, vocabs, beam, batch, threads, src):
    cmd = [MARIAN, "decode", "-m", npz, "-v", *vocabs, "--beam-size", str(beam),
           "--mini-batch", str(batch), "--maxi-batch", "100", "--maxi-batch-sort", "src",
           "--cpu-threads", str(threads), "--normalize", "0", "--word-penalty", "0",
           "--max-length-factor", "3", "--quiet", "-i", src]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.splitlines(), time.perf_counter() - start


# ---------------------------------------------------------------- train

def train(args):
    out = os.path.abspath(args.out_dir)
    os.makedirs(out, exist_ok=True)
    d = args.data
    vocab = os.path.join(out, "vocab.spm")
    cmd = [MARIAN, "--type", "transformer", "--model", os.path.join(out, "model.npz"),
           "--train-sets", os.path.join(d, "train.en"), os.path.join(d, "train.de"),
           "--vocabs", vocab, vocab, "--dim-vocabs", str(args.vocab_size), str(args.vocab_size),
           "--dim-emb", str(args.dim), "--enc-depth", str(args.depth), "--dec-depth",
           str(args.depth), "--transformer-heads", str(args.heads), "--transformer-dim-ffn",
           str(args.ffn), "--transformer-postprocess", "dan", "--transformer-postprocess-emb", "d",
           "--transformer-ffn-activation", "swish", "--tied-embeddings-all",
           "--transformer-dropout", "0.1", "--label-smoothing", "0.1",
           "--learn-rate", str(args.lr), "--lr-warmup", str(args.warmup),
           "--lr-decay-inv-sqrt", str(args.warmup), "--optimizer-params", "0.9", "0.98", "1e-09",
           "--clip-norm", "5", "--mini-batch-words", "4000", "--maxi-batch", "100",
           "--max-length", "100",
           "--after", "1u" if args.init else args.after or f"{args.epochs}e",
           "--valid-sets", os.path.join(d, "val.en"), os.path.join(d, "val.de"),
           "--valid-metrics", "cross-entropy", "--valid-freq", args.valid_freq,
           "--valid-mini-batch", "32", "--early-stopping", "0", "--disp-freq", "50u",
           "--save-freq", args.valid_freq, "--cpu-threads", str(args.threads),
           "--workspace", "4096", "--seed", "1", "--overwrite", "--log",
           os.path.join(out, "train.log"), "--valid-log", os.path.join(out, "valid.log")]
    print("+", " ".join(cmd), flush=True)
    start = time.perf_counter()
    subprocess.run(cmd, check=True)  # its log goes to stderr and to train.log
    secs = time.perf_counter() - start
    # "Ep. 1 : Up. 50 : Sen. 9,792 : Cost 7.6 : Time 30.25s : 1181.15 words/s"
    pat = re.compile(r"Ep\. (\d+) : Up\. ([\d,]+) : .*Cost ([\d.]+).* : "
                     r"Time ([\d.]+)s : ([\d.,]+) words/s")
    rows = [m.groups() for m in map(pat.search, open(os.path.join(out, "train.log"))) if m]
    words = sum(float(r[3]) * float(r[4].replace(",", "")) for r in rows)
    timed = sum(float(r[3]) for r in rows)
    if args.init:
        print(f"initialised in {secs:.0f} s: {out}/model.npz and {vocab}")
        return 0
    valid = [x.strip() for x in open(os.path.join(out, "valid.log")) if "cross-entropy" in x]
    test = os.path.join(out, "test2016.marian.de")
    lines, dsecs = marian_decode(os.path.join(out, "model.npz"), [vocab, vocab], 5, 32,
                                 args.threads, os.path.join(d, "test2016.en"))
    open(test, "w", encoding="utf-8").write("".join(x + "\n" for x in lines))
    score = bleu(lines, read_lines(os.path.join(d, "test2016.de")))
    summary = {"train_seconds": round(secs, 1), "epochs": rows[-1][0] if rows else None,
               "updates": rows[-1][1].replace(",", "") if rows else None,
               "last_cost": float(rows[-1][2]) if rows else None,
               "target_words_per_s": round(words / timed, 1) if timed else None,
               "last_validation": valid[-1] if valid else None,
               "test2016_bleu_beam5": round(score, 2), "decode_seconds": round(dsecs, 1),
               "command": " ".join(cmd[1:]).replace(d, "$DATA").replace(out, "$OUT")}
    json.dump(summary, open(os.path.join(out, "train.json"), "w"), indent=1)
    print(f"trained in {secs:.0f} s ({summary['updates']} updates, epoch {summary['epochs']}, "
          f"{summary['target_words_per_s']} target words/s); last validation: "
          f"{summary['last_validation']}")
    print(f"test2016 BLEU (pymarian decode, beam 5, --normalize 0): {score:.2f}; "
          f"output in {test}")
    return 0


# ---------------------------------------------------------------- compare: model and text

def find_npz(model_dir):
    if os.path.exists(os.path.join(model_dir, "model.npz")):
        return os.path.join(model_dir, "model.npz")
    found = [p for p in glob.glob(os.path.join(model_dir, "*.npz"))
             if not p.endswith(".optimizer.npz")]
    if len(found) != 1:
        sys.exit(f"marian.py: want model.npz or exactly one .npz in {model_dir}, found {found}")
    return found[0]


def find_vocabs(model_dir, npz):
    if os.path.exists(os.path.join(model_dir, "vocab.spm")):
        return [os.path.join(model_dir, "vocab.spm")] * 2
    for name in (npz + ".decoder.yml", os.path.join(model_dir, "decoder.yml")):
        if os.path.exists(name):
            vocabs = yaml.load(open(name, encoding="utf-8"), Loader=yaml.BaseLoader)["vocabs"]
            return [os.path.join(model_dir, v) for v in vocabs[:1] + vocabs[-1:]]
    sys.exit(f"marian.py: no vocab.spm, model.npz.decoder.yml or decoder.yml in {model_dir}")


class Text:
    """Text <-> what the engines read and write. .spm vocabularies: raw text both ways; .yml
    ones: pieces of source.spm in, pieces out, joined by target.spm."""

    def __init__(self, model_dir, vocabs):
        self.pieces = vocabs[0].endswith(".yml")
        names = [os.path.join(model_dir, n) for n in ("source.spm", "target.spm")]
        if self.pieces and not all(map(os.path.exists, names)):
            sys.exit(f"marian.py: .yml vocabularies need {' and '.join(names)} to segment text")
        src, tgt = names if self.pieces else vocabs
        self.src = spm.SentencePieceProcessor(model_file=src)
        self.tgt = spm.SentencePieceProcessor(model_file=tgt)

    def encode(self, line):
        return self.src.encode(line, out_type=str)

    def engine_input(self, line):
        return " ".join(self.encode(line)) if self.pieces else line

    def engine_output(self, line):
        return self.tgt.decode(line.split()) if self.pieces else line

    def decode(self, pieces):
        return self.tgt.decode(pieces)

    def count(self, line):
        return len(self.tgt.encode(line))


def marian_positions(dim, num_positions=2048):
    """Marian's sinusoid (graph/node_initializers.cpp): [sin | cos], exp(-i ln(10^4)/(d/2-1))."""
    half = dim // 2
    v = np.arange(num_positions)[:, None] * np.exp(-np.log(10000.0) / (half - 1) * np.arange(half))
    return np.concatenate([np.sin(v), np.cos(v)], 1).astype(np.float32)


def ct2_convert(model_dir, npz, vocabs, quantization, marian_pos):
    from ctranslate2.converters import marian
    name = f"ct2-{quantization}" + ("-marianpos" if marian_pos else "")
    out = os.path.join(model_dir, name)
    if os.path.exists(os.path.join(out, "model.bin")) and \
            os.path.getmtime(os.path.join(out, "model.bin")) > os.path.getmtime(npz):
        return out
    # Marian 1.12 pads special:model.yml with NULs; the converter strips one, and PyYAML then
    # fails on the rest ("unacceptable character #x0000"), as in transformers' converter.
    marian._get_model_config = lambda model: yaml.safe_load(
        bytes(model["special:model.yml"]).decode("utf-8").rstrip("\0"))
    # The converter reads .yml vocabularies only; Marian numbers a .spm's pieces by their ids.
    load_yml = getattr(marian, "load_yml_vocab", marian.load_vocab)
    marian.load_yml_vocab = load_yml
    marian.load_vocab = lambda p: load_yml(p) if not p.endswith(".spm") else [
        s.id_to_piece(i) for s in [spm.SentencePieceProcessor(model_file=p)]
        for i in range(s.get_piece_size())]
    if marian_pos:
        marian._make_sinusoidal_position_encodings = marian_positions
    marian.MarianConverter(npz, vocabs).convert(
        out, quantization=None if quantization == "float32" else quantization, force=True)
    os.sync()  # written back now, not during the first timed run (translate.py)
    return out


# ---------------------------------------------------------------- compare: engines

def run_tx(args, npz, vocabs, src, beam, batch, extra=()):
    cmd = [args.tx_bin, "-m", npz, "-v", *vocabs, "--beam-size", str(beam), "--mini-batch",
           str(batch), "--maxi-batch", "100", "--max-tokens", "1000000", "--normalize", "0",
           "--max-length-factor", "3", "--cpu-threads", str(args.threads), "--quiet", "-i", src,
           *extra]
    start = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.splitlines(), time.perf_counter() - start


def run_ct2(args, ct2_dir, text, lines, beam, batch, limit):
    import ctranslate2
    start = time.perf_counter()
    tr = ctranslate2.Translator(ct2_dir, device="cpu", inter_threads=1, intra_threads=args.threads)
    res = tr.translate_batch([text.encode(x) for x in lines], beam_size=beam, length_penalty=0,
                             max_batch_size=batch, batch_type="examples",
                             max_decoding_length=limit)
    out = [text.decode(r.hypotheses[0]) for r in res]
    return out, time.perf_counter() - start


def emit(args, row):
    line = json.dumps(row, sort_keys=True)
    if args.json:
        open(args.json, "a").write(line + "\n")
    else:
        print(line)


def compare(args):
    model_dir = os.path.abspath(args.model_dir)
    npz = find_npz(model_dir)
    vocabs = find_vocabs(model_dir, npz)
    text = Text(model_dir, vocabs)
    src_lines, ref = read_lines(args.src, args.lines), read_lines(args.ref, args.lines)
    work = tempfile.mkdtemp(prefix="tx-marian-bench.")
    try:
        src = os.path.join(work, "src")
        open(src, "w", encoding="utf-8").write(
            "".join(text.engine_input(x) + "\n" for x in src_lines))
        settings = [tuple(int(x) for x in s.split("x")) for s in args.settings.split(",") if s]
        int8_settings = [tuple(int(x) for x in s.split("x"))
                         for s in args.int8_settings.split(",") if s and args.int8]
        limit = 3 * (max(len(text.encode(x)) for x in src_lines) + 1)
        if settings or int8_settings:
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import _pymarian"], check=True)
            print(f"{len(src_lines)} lines of {args.src}, {args.threads} threads; times include "
                  f"loading; Python start-up of pymarian (in Marian's times): "
                  f"{time.perf_counter() - start:.2f} s; CTranslate2's length limit {limit}")
            print(f"{'engine':<12}{'beam':>5}{'batch':>6}{'sec':>8}{'sent/s':>9}{'tok/s':>9}"
                  f"{'BLEU':>7}{'=marian':>9}{'tx/this':>9}")
        marian_out = {}

        def bench(beam, batch, engines, kind):
            times = {name: [] for name, _ in engines}
            outs = {}
            for _ in range(max(1, args.rounds)):
                for name, fn in engines:
                    outs[name], secs = fn(beam, batch)
                    times[name].append(secs)
            if "marian" in outs:
                marian_out[(beam, batch)] = outs["marian"]
            base = marian_out.get((beam, batch))  # None with --no-marian
            tx_name = engines[0][0] if kind == "int8" else "tx"
            med = {n: statistics.median(t) for n, t in times.items()}
            row = {"kind": kind, "beam": beam, "batch": batch, "lines": len(src_lines),
                   "threads": args.threads, "engines": {}}
            for name, _ in engines:
                out, secs = outs[name], med[name]
                same = sum(a == b for a, b in zip(out, base)) if base else None
                e = {"seconds": round(secs, 3), "rounds": [round(t, 3) for t in times[name]],
                     "sent_per_s": round(len(out) / secs, 2),
                     "tok_per_s": round(sum(map(text.count, out)) / secs, 1),
                     "bleu": round(bleu(out, ref), 2), "identical_to_marian": same,
                     "tx_speedup": round(secs / med[tx_name], 3)}
                row["engines"][name] = e
                shown = f"{100 * same / len(out):>8.1f}%" if base else f"{'-':>9}"
                print(f"{name:<12}{beam:>5}{batch:>6}{secs:>8.2f}{e['sent_per_s']:>9.1f}"
                      f"{e['tok_per_s']:>9.0f}{e['bleu']:>7.2f}{shown}{e['tx_speedup']:>9.2f}")
            if args.rounds > 1:
                for name, _ in engines:
                    if name != tx_name:
                        r = " ".join(f"{o / t:.2f}" for o, t in zip(times[name], times[tx_name]))
                        print(f"{'':<12}{name} time / tx time by round: {r}")
            emit(args, row)

        def marian_fn(beam, batch):
            out, secs = marian_decode(npz, vocabs, beam, batch, args.threads, src)
            return [text.engine_output(x) for x in out], secs

        def tx_fn(extra):
            def fn(beam, batch):
                out, secs = run_tx(args, npz, vocabs, src, beam, batch, extra)
                return [text.engine_output(x) for x in out], secs
            return fn

        def ct2_fn(path):
            return lambda beam, batch: run_ct2(args, path, text, src_lines, beam, batch, limit)

        for quant, todo in (("float32", settings), ("int8", int8_settings)):
            ct2 = todo and ct2_convert(model_dir, npz, vocabs, quant, args.ct2_marian_positions)
            for beam, batch in todo:
                if quant == "float32":
                    marian = [] if args.no_marian else [("marian", marian_fn)]
                    bench(beam, batch, marian + [("tx", tx_fn(())), ("ct2", ct2_fn(ct2))],
                          "float32")
                    continue
                if (beam, batch) not in marian_out and not args.no_marian:
                    # identical lines: against Marian float32
                    marian_out[(beam, batch)] = marian_fn(beam, batch)[0]
                bench(beam, batch, [("tx --int8", tx_fn(("--int8",))),
                                    ("ct2 int8", ct2_fn(ct2))], "int8")
        if args.hf_dir:
            if args.make_hf and not make_hf(model_dir, npz, os.path.abspath(args.hf_dir)):
                return 0
            hf_compare(args, work)
    finally:
        shutil.rmtree(work)
    return 0


# ---------------------------------------------------------------- Hugging Face

def opus_layout_from_joint_spm(vocab_spm, stage):
    """The OPUS-MT layout transformers' converter reads, made from one joint SentencePiece
    model as `train` writes it: source.spm and target.spm are copies, the *vocab.yml lists its
    pieces under their SentencePiece ids (the ids Marian itself uses with a .spm vocabulary), so
    that MarianTokenizer (segment with source.spm, look each piece up) gives Marian's ids."""
    sp = spm.SentencePieceProcessor(model_file=vocab_spm)
    for n in ("source.spm", "target.spm"):
        shutil.copy(vocab_spm, os.path.join(stage, n))
    yml = os.path.join(stage, "opus.spm-spm.vocab.yml")
    with open(yml, "w", encoding="utf-8") as f:  # JSON strings are YAML scalars
        for i in range(sp.get_piece_size()):
            f.write(f"{json.dumps(sp.id_to_piece(i), ensure_ascii=False)}: {i}\n")
    with open(os.path.join(stage, "decoder.yml"), "w", encoding="utf-8") as f:
        f.write("models:\n  - model.npz\nvocabs:\n  - opus.spm-spm.vocab.yml\n"
                "  - opus.spm-spm.vocab.yml\nbeam-size: 5\nnormalize: 0\n")
    return [yml]


def make_hf(model_dir, npz, hf_dir):
    """transformers' own converter on a staged copy (it writes vocab.json into its source and
    takes the languages from the directory's name), saved in float32 as make.py's hf-fp32.
    A model with one joint vocab.spm (as `train` writes) is staged in the OPUS-MT layout first
    (opus_layout_from_joint_spm)."""
    ymls = glob.glob(os.path.join(model_dir, "*vocab.yml"))
    dec = [p for p in (os.path.join(model_dir, "decoder.yml"), npz + ".decoder.yml")
           if os.path.exists(p)]
    joint = os.path.join(model_dir, "vocab.spm")
    missing = [n for n in ("source.spm", "target.spm")
               if not os.path.exists(os.path.join(model_dir, n))]
    missing += [] if ymls else ["*vocab.yml"]
    missing += [] if dec else ["decoder.yml"]
    if missing and not os.path.exists(joint):
        print(f"--make-hf: transformers' converter needs the OPUS-MT layout (source.spm, "
              f"target.spm, a *vocab.yml and decoder.yml beside the .npz) or one joint "
              f"vocab.spm; {model_dir} lacks: {', '.join(missing)}. Not converted; the Hugging "
              f"Face comparison is skipped.")
        return False
    if os.path.isdir(hf_dir) and os.listdir(hf_dir) and \
            not os.path.exists(os.path.join(hf_dir, "config.json")):
        sys.exit(f"marian.py: {hf_dir} holds files but no config.json; not overwriting it")
    import torch
    from transformers import MarianMTModel
    from transformers.models.marian import convert_marian_to_pytorch as conv
    torch.set_num_threads(1)

    def load_config_from_state_dict(opus_dict):  # every trailing NUL stripped (make.py)
        cfg = bytes(opus_dict[conv.CONFIG_KEY]).decode("utf-8").rstrip("\0")
        return conv.cast_marian_config(yaml.load(cfg, Loader=yaml.BaseLoader))
    conv.load_config_from_state_dict = load_config_from_state_dict
    with tempfile.TemporaryDirectory() as stage:
        s = os.path.join(stage, "en-de")
        os.mkdir(s)
        if missing:
            opus_layout_from_joint_spm(joint, s)
        else:
            for f in ymls + [os.path.join(model_dir, n) for n in ("source.spm", "target.spm")]:
                shutil.copy(f, s)
            shutil.copy(dec[0], os.path.join(s, "decoder.yml"))
        shutil.copy(npz, os.path.join(s, "model.npz"))
        try:
            state = conv.OpusState(Path(s))
            shutil.rmtree(hf_dir, ignore_errors=True)
            state.tokenizer.save_pretrained(hf_dir)
            state.load_marian_model().float().save_pretrained(hf_dir, safe_serialization=True)
        except (ValueError, NotImplementedError, KeyError, IndexError) as e:
            print(f"--make-hf: transformers' converter refused {npz}: {type(e).__name__}: {e}; "
                  f"the Hugging Face comparison is skipped.")
            return False
    cfg_path = os.path.join(hf_dir, "config.json")
    cfg = json.load(open(cfg_path))
    if cfg["max_position_embeddings"] < 512:  # the converter sets it to dim-emb
        print(f"--make-hf: max_position_embeddings {cfg['max_position_embeddings']} -> 512")
        cfg["max_position_embeddings"] = 512
        json.dump(cfg, open(cfg_path, "w"), indent=2, sort_keys=True)
    MarianMTModel.from_pretrained(hf_dir)  # loads
    print(f"--make-hf: wrote {hf_dir}")
    return True


def hf_compare(args, work):
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    torch.set_num_threads(args.threads)
    hf_dir = os.path.abspath(args.hf_dir)
    lines, ref = read_lines(args.src, args.hf_lines), read_lines(args.ref, args.hf_lines)
    src = os.path.join(work, "hf.src")
    open(src, "w", encoding="utf-8").write("".join(x + "\n" for x in lines))
    tok = MarianTokenizer.from_pretrained(hf_dir)
    model = MarianMTModel.from_pretrained(hf_dir).eval()
    print(f"Hugging Face: {hf_dir}, {len(lines)} lines, generate() in batches of {args.hf_batch}")
    print(f"{'engine':<12}{'beam':>5}{'sec':>8}{'BLEU':>7}{'identical':>11}")
    for beam in (int(b) for b in args.hf_beams.split(",")):
        cmd = [args.tx_bin, "-m", hf_dir, "--beam-size", str(beam), "--normalize", "1",
               "--max-length-factor", "0", "--max-length-b", "510", "--cpu-threads",
               str(args.threads), "--quiet", "-i", src]
        start = time.perf_counter()
        tx_out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
        tx_s = time.perf_counter() - start
        kw = dict(num_beams=beam, do_sample=False, max_length=512)
        if beam > 1:
            kw.update(early_stopping=False, length_penalty=1.0)
        start, hf_out = time.perf_counter(), []
        with torch.no_grad():
            for i in range(0, len(lines), args.hf_batch):
                enc = tok(lines[i:i + args.hf_batch], return_tensors="pt", padding=True)
                hf_out += tok.batch_decode(model.generate(**enc, **kw), skip_special_tokens=True)
        hf_s = time.perf_counter() - start
        same = sum(a == b for a, b in zip(tx_out, hf_out))
        row = {"kind": "hf", "beam": beam, "lines": len(lines), "hf_batch": args.hf_batch,
               "identical": same, "engines": {}}
        for name, out, secs in (("tx", tx_out, tx_s), ("generate", hf_out, hf_s)):
            row["engines"][name] = {"seconds": round(secs, 3), "bleu": round(bleu(out, ref), 2)}
            print(f"{name:<12}{beam:>5}{secs:>8.2f}{bleu(out, ref):>7.2f}"
                  f"{same:>6}/{len(out):<4} ({100 * same / len(out):.1f}%)")
        emit(args, row)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train an OPUS-MT-shaped Marian model on Multi30k en->de")
    t.add_argument("out_dir")
    t.add_argument("--data", default=DATA)
    t.add_argument("--epochs", type=int, default=4)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--dim", type=int, default=512)
    t.add_argument("--depth", type=int, default=6)
    t.add_argument("--heads", type=int, default=8)
    t.add_argument("--ffn", type=int, default=2048)
    t.add_argument("--vocab-size", type=int, default=8000)
    t.add_argument("--lr", type=float, default=0.0003)
    t.add_argument("--warmup", type=int, default=200, help="warm-up updates (then inverse sqrt)")
    t.add_argument("--valid-freq", default="200u", help="validate (and save) every N updates")
    t.add_argument("--after", help=argparse.SUPPRESS)  # e.g. 50u for a smoke test
    t.add_argument("--init", action="store_true",
                   help="one update and no test decoding: Marian's initialised model and "
                        "vocabulary, for tx-train --pretrained-model (README.md)")
    c = sub.add_parser("compare", help="time Marian, tx-translate and CTranslate2 on the model")
    c.add_argument("model_dir")
    c.add_argument("--src", default=os.path.join(DATA, "test2016.en"))
    c.add_argument("--ref", default=os.path.join(DATA, "test2016.de"))
    c.add_argument("--lines", type=int, default=1000, help="the first N lines of --src/--ref")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--settings", default="5x32,4x32,1x32,5x1", help="beam x batch, comma-separated")
    c.add_argument("--rounds", type=int, default=1,
                   help="runs of each engine per setting, alternating; medians are reported")
    c.add_argument("--int8", action="store_true", help="also tx --int8 against CT2 int8")
    c.add_argument("--int8-settings", default="5x32", help="beam x batch for --int8")
    c.add_argument("--ct2-marian-positions", action="store_true",
                   help="give the CTranslate2 model Marian's position table")
    c.add_argument("--tx-bin", default=os.path.join(ROOT, "build", "apps", "tx-translate"))
    c.add_argument("--no-marian", action="store_true",
                   help="time tx and CTranslate2 only (no identical-line counts): more rounds "
                   "of the two in the time of one of Marian's")
    c.add_argument("--json", help="append the JSON lines here instead of stdout")
    c.add_argument("--hf-dir", help="the model as a Hugging Face MarianMTModel directory")
    c.add_argument("--make-hf", action="store_true",
                   help="first write --hf-dir with transformers' converter (OPUS-MT layout only)")
    c.add_argument("--hf-lines", type=int, default=200)
    c.add_argument("--hf-batch", type=int, default=1, help="sentences per generate() call")
    c.add_argument("--hf-beams", default="1,5", help="beam sizes of the generate() comparison")
    args = ap.parse_args()
    if args.command == "train":
        return train(args)
    if not os.path.exists(args.src):
        print(f"marian.py: {args.src} not found; skipping (give --src and --ref)")
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
