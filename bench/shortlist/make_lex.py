"""A lexical table for tx-translate --shortlist in Marian's lex.s2t format, from a parallel
corpus: IBM Model 1 p(target piece | source piece) by EM over the SentencePiece pieces of each
pair (NULL source included), ITERATIONS rounds from uniform; pairs below MIN_PROB left out.
Marian's pipelines use fast_align + extract_lex; Model 1 is the simplest honest stand-in.

    bench/.venv/bin/python bench/shortlist/make_lex.py SRC TGT SRC.spm TGT.spm OUT [ITERATIONS=5]

Lines of OUT: "<target piece> <source piece> <probability>".
"""
import sys
from collections import defaultdict

import sentencepiece as spm


def model1(pairs, iterations, log=False):
    """IBM Model 1's t(target | source) after `iterations` EM rounds from uniform, for pairs of
    (source pieces with "<null>" first, target pieces)."""
    prob = defaultdict(lambda: 1.0)  # uniform at first
    for it in range(iterations):
        counts = defaultdict(float)
        totals = defaultdict(float)
        for src, tgt in pairs:
            for t in tgt:
                z = sum(prob[(t, s)] for s in src)
                for s in src:
                    c = prob[(t, s)] / z
                    counts[(t, s)] += c
                    totals[s] += c
        prob = defaultdict(float, {(t, s): c / totals[s] for (t, s), c in counts.items()})
        if log:
            print(f"iteration {it + 1}: {len(prob)} pairs", file=sys.stderr)
    return prob


def main():
    src_path, tgt_path, src_spm, tgt_spm, out = sys.argv[1:6]
    iterations = int(sys.argv[6]) if len(sys.argv) > 6 else 5
    min_prob = 1e-3
    sp_s = spm.SentencePieceProcessor(model_file=src_spm)
    sp_t = spm.SentencePieceProcessor(model_file=tgt_spm)
    pairs = []
    with open(src_path, encoding="utf-8") as fs, open(tgt_path, encoding="utf-8") as ft:
        for s, t in zip(fs, ft):
            pairs.append((["<null>"] + sp_s.encode(s.strip(), out_type=str),
                          sp_t.encode(t.strip(), out_type=str)))
        prob = model1(pairs, iterations, log=True)
    with open(out, "w", encoding="utf-8") as f:
        for (t, s), p in sorted(prob.items(), key=lambda x: (x[0][1], -x[1])):
            if s != "<null>" and p >= min_prob:
                f.write(f"{t} {s} {p:.6g}\n")


if __name__ == "__main__":
    main()
