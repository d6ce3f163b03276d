"""A PyTorch model of tx's Transformer, for timing training side by side (a peer, not a product).

The paper's post-norm Transformer with tx's choices: one embedding table shared by source,
target and the output projection (no output bias), embeddings scaled by sqrt(d_model), tx's
sinusoidal table ([sin, cos] interleaved by pair, positions from 0), no final LayerNorm,
label-smoothed cross-entropy summed over target tokens and divided by their count, Adam
(0.9, 0.98, 1e-9) with fairseq's inverse-sqrt schedule. The layers are PyTorch's own
nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (norm_first=False, ReLU): what a
PyTorch user would write.

Batches are cut as tx-train cuts them (data/batcher.cc): within windows of --maxi-batch x
--max-tokens tokens, pairs sorted by max(source + eos, bos + target) and cut greedily so that
rows x the widest row stays within --max-tokens; whole batches shuffled.

On a GPU (--device cuda), --precision picks the GEMMs' arithmetic: fp32 (exact), tf32
(torch.backends.cuda.matmul.allow_tf32) or bf16 (torch.autocast with bfloat16: PyTorch's AMP,
fp32 weights and optimizer).

It is also the independent reference for tx-train's learning curves: `--lr-schedule linear
--after-updates N` is tx's linear schedule (warm-up to the peak, then a straight line to 0 at
update N), `--init tx` draws the weights as tx does (Glorot-uniform per [out, in] matrix, q, k
and v each their own, zero biases, embeddings normal with std d_model^-0.5) rather than
PyTorch's defaults, and `--valid-src/--valid-tgt` print tx's validation cross-entropy (nats per
target token, eos counted, no smoothing, dropout off) every `--valid-freq` updates. PyTorch's
layers have one dropout rate for the sublayer outputs, the attention probabilities and the
feed-forward activation; compare with tx runs whose three rates are equal.

Usage: torch_transformer.py --spm VOCAB.spm --src train.en --tgt train.de --updates 60
       [--warmup-updates 10] [--threads 2] [--max-tokens 4096] [--device cuda]
       [--precision fp32|tf32|bf16] [--valid-src val.en --valid-tgt val.de --valid-freq 250]
       ... ; prints one JSON line.
"""
import contextlib
import argparse
import json
import math
import random
import resource
import sys
import time

import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, BOS, EOS = 0, 2, 3  # tx's special ids (data/vocab.h)


def position_table(length, d):
    # tx's table (nn/transformer.cc): even columns sin, odd columns cos of pos / 10000^(2i/d).
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, i / d)
    table = torch.zeros(length, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


class Transformer(nn.Module):
    def __init__(self, vocab, d_model, heads, d_ff, enc_layers, dec_layers, dropout, max_len=512):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        nn.init.normal_(self.embed.weight, std=d_model ** -0.5)
        enc = nn.TransformerEncoderLayer(d_model, heads, d_ff, dropout, batch_first=True)
        dec = nn.TransformerDecoderLayer(d_model, heads, d_ff, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc, enc_layers, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec, dec_layers)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("positions", position_table(max_len, d_model))

    def init_as_tx(self):
        # tx's ParamScope: Glorot-uniform on each [out, in] weight (q, k and v separately), zero
        # biases; LayerNorms at 1 and 0 (PyTorch's default already).
        def glorot(w):
            bound = math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
            with torch.no_grad():
                w.uniform_(-bound, bound)
        for m in self.modules():
            if isinstance(m, nn.MultiheadAttention):
                d = m.embed_dim
                for i in range(3):
                    glorot(m.in_proj_weight[i * d:(i + 1) * d])
                nn.init.zeros_(m.in_proj_bias)
            elif isinstance(m, nn.Linear):
                glorot(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def embed_at(self, ids):
        x = self.embed(ids) * math.sqrt(self.d_model) + self.positions[: ids.shape[1]]
        return self.drop(x)

    def forward(self, src, tgt_in):
        src_pad = src == PAD
        memory = self.encoder(self.embed_at(src), src_key_padding_mask=src_pad)
        t = tgt_in.shape[1]
        causal = torch.triu(torch.full((t, t), float("-inf"), device=tgt_in.device), diagonal=1)
        h = self.decoder(self.embed_at(tgt_in), memory, tgt_mask=causal,
                         tgt_key_padding_mask=tgt_in == PAD, memory_key_padding_mask=src_pad)
        return h @ self.embed.weight.t()


def batches(src_ids, tgt_ids, max_tokens, maxi_batch, seed):
    """Yields (src, tgt_in, tgt_out) tensors forever, epoch after epoch, as tx's Batcher cuts."""
    cost = [max(len(s) + 1, len(t) + 1) for s, t in zip(src_ids, tgt_ids)]
    rng = random.Random(seed)
    while True:
        order = list(range(len(cost)))
        rng.shuffle(order)
        cut = []
        begin = 0
        while begin < len(order):
            end, tokens = begin, 0
            while end < len(order) and (end == begin or tokens + cost[order[end]] <= maxi_batch * max_tokens):
                tokens += cost[order[end]]
                end += 1
            window = sorted(order[begin:end], key=lambda i: cost[i])
            rows, width, start = [], 0, 0
            for k, i in enumerate(window):
                w = max(width, cost[i])
                if rows and (len(rows) + 1) * w > max_tokens:
                    cut.append(rows)
                    rows, w = [], cost[i]
                rows.append(i)
                width = w
            if rows:
                cut.append(rows)
            begin = end
        rng.shuffle(cut)
        for rows in cut:
            yield padded(src_ids, tgt_ids, rows)


def padded(src_ids, tgt_ids, rows):
    """(src + eos, bos + tgt, tgt + eos) of these pairs, padded to the widest."""
    ls = max(len(src_ids[i]) + 1 for i in rows)
    lt = max(len(tgt_ids[i]) + 1 for i in rows)
    src = torch.full((len(rows), ls), PAD, dtype=torch.long)
    tin = torch.full((len(rows), lt), PAD, dtype=torch.long)
    tout = torch.full((len(rows), lt), PAD, dtype=torch.long)
    for r, i in enumerate(rows):
        s, t = src_ids[i] + [EOS], tgt_ids[i]
        src[r, : len(s)] = torch.tensor(s)
        tin[r, : len(t) + 1] = torch.tensor([BOS] + t)
        tout[r, : len(t) + 1] = torch.tensor(t + [EOS])
    return src, tin, tout


def valid_cross_entropy(model, src_ids, tgt_ids, device, rows_per_batch=64):
    """tx-train's validation figure: -log p summed over target tokens (eos counted) / count."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(src_ids), rows_per_batch):
            src, tin, tout = (t.to(device) for t in padded(
                src_ids, tgt_ids, range(b, min(b + rows_per_batch, len(src_ids)))))
            logits = model(src, tin).float()
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tout.reshape(-1),
                                           ignore_index=PAD, reduction="sum"))
            count += int((tout != PAD).sum())
    model.train()
    return total / count


def read_pairs(sp, src_path, tgt_path, max_length):
    src_ids, tgt_ids = [], []
    with open(src_path) as fs, open(tgt_path) as ft:
        for s, t in zip(fs, ft):
            a, b = sp.encode(s.strip()), sp.encode(t.strip())
            if 0 < len(a) < max_length and 0 < len(b) < max_length:
                src_ids.append(a)
                tgt_ids.append(b)
    return src_ids, tgt_ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spm", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--tgt", required=True)
    ap.add_argument("--updates", type=int, default=60)
    ap.add_argument("--warmup-updates", type=int, default=10, help="not timed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--maxi-batch", type=int, default=100)
    ap.add_argument("--max-length", type=int, default=100)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--d-ff", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--enc-layers", type=int, default=3)
    ap.add_argument("--dec-layers", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--learn-rate", type=float, default=1e-3)
    ap.add_argument("--lr-warmup", type=int, default=800)
    ap.add_argument("--lr-schedule", choices=["inverse-sqrt", "linear"], default="inverse-sqrt")
    ap.add_argument("--after-updates", type=int, default=0,
                    help="linear: the update at which the rate reaches 0 (default --updates)")
    ap.add_argument("--init", choices=["torch", "tx"], default="torch")
    ap.add_argument("--valid-src")
    ap.add_argument("--valid-tgt")
    ap.add_argument("--valid-freq", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=["fp32", "tf32", "bf16"], default="fp32")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    sp = spm.SentencePieceProcessor(model_file=args.spm)
    src_ids, tgt_ids = read_pairs(sp, args.src, args.tgt, args.max_length)
    valid = (read_pairs(sp, args.valid_src, args.valid_tgt, 1 << 30)
             if args.valid_src and args.valid_tgt else None)

    model = Transformer(sp.get_piece_size(), args.d_model, args.heads, args.d_ff,
                        args.enc_layers, args.dec_layers, args.dropout)
    if args.init == "tx":
        model.init_as_tx()
    device = torch.device(args.device)
    model.to(device)
    model.train()
    torch.backends.cuda.matmul.allow_tf32 = args.precision == "tf32"
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16)
                if args.precision == "bf16" else contextlib.nullcontext())
    opt = torch.optim.Adam(model.parameters(), lr=args.learn_rate, betas=(0.9, 0.98), eps=1e-9)
    warm = args.lr_warmup
    end = args.after_updates or args.updates
    if args.lr_schedule == "linear":  # update t = step + 1 gets tx's rate (train/lr_schedule.cc)
        factor = lambda step: (step + 1) / warm if step + 1 < warm else max(
            0.0, (end - step) / (end + 1 - warm))
    else:
        factor = lambda step: min((step + 1) / warm, math.sqrt(warm / (step + 1)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    curve = []

    feed = batches(src_ids, tgt_ids, args.max_tokens, args.maxi_batch, args.seed)
    timed_tokens, timed_secs, cost = 0, 0.0, 0.0
    for update in range(args.updates):
        src, tin, tout = next(feed)
        start = time.perf_counter()
        src, tin, tout = src.to(device), tin.to(device), tout.to(device)
        tokens = int((tout != PAD).sum())
        with autocast:
            logits = model(src, tin)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                   tout.reshape(-1), ignore_index=PAD,
                                   label_smoothing=args.label_smoothing, reduction="sum")
        opt.zero_grad(set_to_none=True)
        (loss / tokens).backward()
        opt.step()
        sched.step()
        if device.type == "cuda":
            torch.cuda.synchronize()  # the step's kernels finish inside the timed span
        secs = time.perf_counter() - start
        cost = float(loss) / tokens
        if update >= args.warmup_updates:
            timed_tokens += tokens
            timed_secs += secs
        print(f"torch: update {update + 1}: {tokens} target tokens, {secs:.2f} s, cost {cost:.3f}",
              file=sys.stderr)
        if valid and (update + 1) % args.valid_freq == 0:
            ce = valid_cross_entropy(model, *valid, device)
            curve.append([update + 1, ce])
            print(f"torch: update {update + 1}: valid cross-entropy {ce:.4f}", file=sys.stderr)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peer": "pytorch " + torch.__version__, "device": args.device,
                      "precision": args.precision, "updates": args.updates,
                      "timed_updates": args.updates - args.warmup_updates,
                      "target_tokens_per_s": timed_tokens / max(timed_secs, 1e-9),
                      "tokens_per_update": timed_tokens / max(args.updates - args.warmup_updates, 1),
                      "last_cost": cost, "valid_cross_entropy": curve, "peak_rss_mb": rss_mb}))


if __name__ == "__main__":
    main()
