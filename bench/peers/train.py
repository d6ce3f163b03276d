"""tx-train against PyTorch and Marian on the same work: target tokens/s and peak memory.

Runs, one after the other in one run, with the same thread count:
1. tx-train on the Multi30k config of issue 7 (train-config.json here: 3 + 3 layers, d_model
   256, dropout 0.1 everywhere, the inverse-sqrt schedule to 1e-3 after 800 updates), which also
   trains the joint 8k SentencePiece model the others then use;
2. torch_transformer.py, a PyTorch model of the same config and the same batch rule;
3. Marian's trainer (pymarian; `--type transformer --transformer-postprocess dan
   --tied-embeddings-all`) with the same SentencePiece model and, as --mini-batch-words, the
   target tokens per update tx's batches had (Marian counts target tokens; tx counts padded
   rows x the longer side).
Each runs --updates updates; the first --warmup-updates are not timed. Prints target tokens/s
(eos counted, padding not), tx's ratio to each, tokens per update and peak resident memory
(the process's maximum RSS). For tx also the GEMM share of the step and the model's FLOP/s
(tx-train's TX_PROFILE=1 counts every GEMM's 2MNK and time) as a fraction of oneDNN's sgemm on
this machine (the best row of bench/gemm, run right after).

Usage: train.py [--data ../shared/data/multi30k] [--updates 40] [--warmup-updates 10]
                [--threads 2] [--peers tx,pytorch,marian] [--keep DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "..", "shared", "data", "multi30k")
# Issue 7's configuration, frozen (the recipe's config.json has moved on): the same model and
# rates as the PyTorch and Marian runs below.
CONFIG = os.path.join(HERE, "train-config.json")


def run_measured(cmd, log_path, env=None):
    """Runs cmd with stdout+stderr to log_path; returns (exit code, seconds, peak RSS in MB)."""
    start = time.perf_counter()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"train.py: {cmd[0]} failed (exit {p.returncode}); see {log_path}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def run_tx(args, work):
    model_dir = os.path.join(work, "tx")
    cmd = [os.path.join(args.bin, "tx-train"), "--config", CONFIG, "--model", model_dir,
           "--train-sets", os.path.join(args.data, "train.en"), os.path.join(args.data, "train.de"),
           "--after-epochs", "0", "--after-updates", str(args.updates), "--disp-freq",
           str(args.warmup_updates), "--save-freq", str(10 ** 9), "--keep-last", "0",
           "--cpu-threads", str(args.threads)]
    _, rss = run_measured(cmd, os.path.join(work, "tx.log"), env=dict(os.environ, TX_PROFILE="1"))
    spans = [json.loads(line) for line in open(os.path.join(model_dir, "train.log.jsonl"))]
    spans = [s for s in spans if s.get("type") == "train" and s["update"] > args.warmup_updates]
    words = sum(s["words_per_s"] * s["time_s"] for s in spans)
    secs = sum(s["time_s"] for s in spans)
    return {"peer": "tx", "target_tokens_per_s": words / secs,
            "tokens_per_update": words / (args.updates - args.warmup_updates),
            "peak_rss_mb": rss, "gemm_s": sum(s["gemm_s"] for s in spans),
            "gemm_gflop": sum(s["gemm_gflop"] for s in spans), "time_s": secs}, \
        os.path.join(model_dir, "vocab.spm")


def sgemm_best(args):
    """The best oneDNN sgemm GFLOP/s of bench/gemm's shapes, or None when it is not built."""
    # Beside --bin's programs in a build tree (build/apps -> build/bench/gemm), else this
    # checkout's build: --bin may point at copies of the programs elsewhere.
    candidates = [os.path.join(os.path.dirname(os.path.abspath(args.bin)), "bench", "gemm"),
                  os.path.join(ROOT, "build", "bench", "gemm")]
    gemm = next((c for c in candidates if os.path.exists(c)), None)
    if not gemm:
        return None
    out = subprocess.run([gemm, "--cpu-threads", str(args.threads), "--seconds", "1"],
                         check=True, capture_output=True, text=True).stdout
    best = None
    for line in out.splitlines():
        if line.startswith("batched"):
            break  # the second table times batched GEMMs against a loop, not the roof
        cols = line.split()
        if len(cols) >= 8:
            try:
                best = max(best or 0.0, float(cols[-4]))  # the "sgemm" column
            except ValueError:
                pass
    return best


def run_torch(args, work, vocab):
    cmd = [sys.executable, os.path.join(HERE, "torch_transformer.py"), "--spm", vocab,
           "--src", os.path.join(args.data, "train.en"), "--tgt", os.path.join(args.data, "train.de"),
           "--updates", str(args.updates), "--warmup-updates", str(args.warmup_updates),
           "--threads", str(args.threads)]
    log = os.path.join(work, "pytorch.log")
    _, rss = run_measured(cmd, log)
    result = json.loads(open(log).read().strip().splitlines()[-1])
    result["peak_rss_mb"] = rss
    return result


def run_marian(args, work, vocab, tokens_per_update):
    marian = os.path.join(os.path.dirname(sys.executable), "pymarian")
    model_dir = os.path.join(work, "marian")
    os.makedirs(model_dir, exist_ok=True)
    cmd = [marian, "--type", "transformer", "--model", os.path.join(model_dir, "model.npz"),
           "--train-sets", os.path.join(args.data, "train.en"), os.path.join(args.data, "train.de"),
           "--vocabs", vocab, vocab, "--dim-vocabs", "8000", "8000",
           "--enc-depth", "3", "--dec-depth", "3", "--dim-emb", "256", "--transformer-heads", "4",
           "--transformer-dim-ffn", "1024", "--transformer-postprocess", "dan",
           "--transformer-postprocess-emb", "d", "--transformer-dropout", "0.1",
           "--transformer-dropout-attention", "0.1", "--transformer-dropout-ffn", "0.1",
           "--tied-embeddings-all", "--label-smoothing", "0.1", "--learn-rate", "0.001",
           "--lr-warmup", "800", "--lr-decay-inv-sqrt", "800",
           "--optimizer-params", "0.9", "0.98", "1e-09",
           "--mini-batch-words", str(int(round(tokens_per_update))), "--maxi-batch", "100",
           "--max-length", "100", "--after", f"{args.updates}u",
           "--disp-freq", f"{args.warmup_updates}u", "--cpu-threads", str(args.threads),
           "--workspace", "2048", "--seed", "1", "--overwrite", "--quiet-translation"]
    log = os.path.join(work, "marian.log")
    _, rss = run_measured(cmd, log)
    # "Ep. 1 : Up. 20 : Sen. 4,640 : Cost ... : Time 30.25s : 1181.15 words/s"
    pat = re.compile(r"Up\. ([\d,]+) : .* : Time ([\d.]+)s : ([\d.,]+) words/s")
    words = secs = 0.0
    for line in open(log):
        m = pat.search(line)
        if m and int(m.group(1).replace(",", "")) > args.warmup_updates:
            t = float(m.group(2))
            words += float(m.group(3).replace(",", "")) * t
            secs += t
    if secs == 0:
        sys.exit(f"train.py: no timed Marian updates in {log}")
    return {"peer": "marian (pymarian)", "target_tokens_per_s": words / secs,
            "tokens_per_update": words / (args.updates - args.warmup_updates),
            "peak_rss_mb": rss}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--warmup-updates", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", default="tx,pytorch,marian")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "apps"))
    ap.add_argument("--keep", help="keep the logs and models in this directory")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.data, "train.en")):
        print(f"train.py: {args.data}/train.en not found; skipping (give --data)")
        return 0
    if args.updates <= args.warmup_updates:
        sys.exit("train.py: --updates must exceed --warmup-updates")
    work = args.keep or tempfile.mkdtemp(prefix="tx-bench-train.")
    os.makedirs(work, exist_ok=True)
    peers = args.peers.split(",")
    load = os.getloadavg()[0]
    print(f"load average before: {load:.2f}; {args.updates} updates each, the first "
          f"{args.warmup_updates} not timed; {args.threads} threads; logs in {work}")

    results = []
    tx, vocab = run_tx(args, work)  # the vocabulary the peers share
    if "tx" in peers:
        results.append(tx)
    if "pytorch" in peers:
        results.append(run_torch(args, work, vocab))
    if "marian" in peers:
        results.append(run_marian(args, work, vocab, tx["tokens_per_update"]))

    print(f"{'peer':<24}{'target tok/s':>14}{'tx / peer':>11}{'tok/update':>12}{'peak RSS MB':>13}")
    for r in results:
        ratio = tx["target_tokens_per_s"] / r["target_tokens_per_s"]
        print(f"{r['peer']:<24}{r['target_tokens_per_s']:>14.0f}{ratio:>11.2f}"
              f"{r['tokens_per_update']:>12.0f}{r['peak_rss_mb']:>13.0f}")
    share = tx["gemm_s"] / tx["time_s"]
    model_gflops = tx["gemm_gflop"] / tx["time_s"]
    print(f"tx: GEMMs {share:.0%} of the step at {tx['gemm_gflop'] / tx['gemm_s']:.1f} GFLOP/s; "
          f"model {tx['gemm_gflop'] / (args.updates - args.warmup_updates):.0f} GFLOP per update, "
          f"{model_gflops:.1f} GFLOP/s")
    roof = sgemm_best(args)
    if roof:
        print(f"oneDNN sgemm, best bench/gemm shape: {roof:.1f} GFLOP/s; "
              f"tx's model FLOP/s = {model_gflops / roof:.2f} of it")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
