#!/usr/bin/env python3
"""Plots a tx-train log (train.log.jsonl) as a PNG: training cost and validation
cross-entropy (and BLEU when logged) against updates.

    plot_log.py MODEL_DIR/train.log.jsonl OUT.png

Needs matplotlib (Debian: python3-matplotlib); tx itself does not.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    train, valid = [], []
    try:
        f = open(sys.argv[1], encoding="utf-8", errors="replace")
    except OSError as e:
        sys.exit(f"plot_log.py: cannot read {sys.argv[1]}: {e.strerror}")
    with f:
        for line in f:
            # A blank line or the half line a killed run left: skipped, as tx-train trims it.
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict) or "update" not in row:
                continue
            if row.get("type") == "train" and "cost" in row:
                train.append(row)
            elif row.get("type") == "valid":
                valid.append(row)
    if not train and not valid:
        sys.exit(f"plot_log.py: {sys.argv[1]} holds no training or validation record")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot([r["update"] for r in train], [r["cost"] for r in train],
            label="training cost (label-smoothed CE per token)", color="tab:blue")
    ce = [r for r in valid if "cross-entropy" in r]
    if ce:
        ax.plot([r["update"] for r in ce], [r["cross-entropy"] for r in ce], "o-",
                label="validation cross-entropy", color="tab:orange")
    ax.set_xlabel("update")
    ax.set_ylabel("nats per target token")
    ax.grid(alpha=0.3)
    lines, labels = ax.get_legend_handles_labels()
    if any("bleu" in r for r in valid):
        ax2 = ax.twinx()
        points = [(r["update"], r["bleu"]) for r in valid if "bleu" in r]
        ax2.plot(*zip(*points), "s--", color="tab:green", label="validation BLEU")
        ax2.set_ylabel("BLEU")
        more = ax2.get_legend_handles_labels()
        lines, labels = lines + more[0], labels + more[1]
    ax.legend(lines, labels, loc="upper right")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(sys.argv[2])


if __name__ == "__main__":
    main()
