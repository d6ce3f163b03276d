#!/usr/bin/env python3
"""Re-serialise a model that only a Python pickle holds as safetensors, for tx's programs.

tx's programs never unpickle (unpickling runs code). Run this once, with Python and torch
(outside tx):

    python3 scripts/to_safetensors.py opus-mt-en-de/
        A Hugging Face model directory whose weights are only pytorch_model.bin (many OPUS-MT
        models on the Hub): writes model.safetensors beside it; `tx-translate -m DIR` reads it.

    python3 scripts/to_safetensors.py checkpoint_best.pt DATA_BIN OUT_DIR [--sentencepiece M]
        A fairseq Transformer checkpoint (fairseq-train's checkpoint*.pt) and the data-bin
        directory it was trained from (for dict.SRC.txt and dict.TGT.txt): writes OUT_DIR with
        model.safetensors (the state dict under fairseq's names), fairseq.json (the checkpoint's
        model options and the files' names) and the dictionaries; with --sentencepiece, the
        SentencePiece model of fairseq's --bpe sentencepiece too, so that tx-translate reads
        plain text as fairseq-interactive does. `tx-translate -m OUT_DIR` reads it.

The tensors keep their names, shapes and dtypes; tied copies are written once (safetensors
refuses shared memory). Nothing is overwritten.
"""
import inspect
import json
import os
import shutil
import sys


def unique_tensors(state):
    import torch

    seen, tensors = {}, {}
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            continue
        key = (t.data_ptr(), t.shape, t.dtype)
        if key in seen:  # a tied copy: tx finds it under the first name
            continue
        seen[key] = name
        tensors[name] = t.contiguous()
    return tensors


def load(path, objects):
    """A PyTorch checkpoint. `objects`: it holds Python objects beside the tensors (fairseq's
    argparse Namespace or omegaconf config), which torch >= 2.6 refuses by default and which
    unpickling runs as code: convert only checkpoints you trust. Otherwise (a Hugging Face
    state dict) tensors alone are read, where torch can."""
    if not os.path.isfile(path):
        sys.exit(f"to_safetensors.py: {path} not found")
    try:
        import torch
    except ImportError:
        sys.exit("to_safetensors.py: needs PyTorch (and safetensors): pip install torch safetensors")
    if "weights_only" not in inspect.signature(torch.load).parameters:  # torch before 1.13
        return torch.load(path, map_location="cpu")
    return torch.load(path, map_location="cpu", weights_only=not objects)


def save(tensors, dst, metadata):
    from safetensors.torch import save_file

    tmp = dst + ".tmp"
    save_file(tensors, tmp, metadata=metadata)
    os.replace(tmp, dst)


def huggingface(directory):
    src = os.path.join(directory, "pytorch_model.bin")
    dst = os.path.join(directory, "model.safetensors")
    if os.path.exists(dst):  # done before: a rerun succeeds, as there is nothing to do
        print(f"to_safetensors.py: {dst} exists already; nothing to do", file=sys.stderr)
        return
    if not os.path.exists(src):
        sys.exit(f"to_safetensors.py: {src} not found; give a Hugging Face model directory")
    tensors = unique_tensors(load(src, objects=False))
    save(tensors, dst, {"format": "pt"})
    print(f"to_safetensors.py: wrote {dst} ({len(tensors)} tensors)", file=sys.stderr)


def plain(value):
    """A checkpoint's options (an argparse Namespace, an omegaconf or plain dict) as JSON data."""
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return plain(vars(value))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def fairseq(checkpoint, data_bin, out_dir, spm):
    out_dir = os.path.normpath(out_dir)  # "wmt-ende/" would put its ".tmp" inside it
    if os.path.exists(out_dir):
        sys.exit(f"to_safetensors.py: {out_dir} exists already; give a new directory")
    state = load(checkpoint, objects=True)
    if not isinstance(state, dict) or "model" not in state:
        sys.exit(f"to_safetensors.py: {checkpoint} is not a fairseq checkpoint (no 'model' entry)")
    if state.get("cfg") is not None:
        cfg = plain(state["cfg"])
        model, task = cfg.get("model") or {}, cfg.get("task") or {}
    elif state.get("args") is not None:
        model = task = plain(state["args"])
    else:
        sys.exit(f"to_safetensors.py: {checkpoint} has neither 'cfg' nor 'args'; not fairseq's")
    arch = model.get("arch") or model.get("_name") or ""
    if not str(arch).startswith("transformer"):
        sys.exit(f"to_safetensors.py: {checkpoint} is a '{arch}' model; tx reads fairseq's "
                 "Transformer (--arch transformer*)")
    src, tgt = task.get("source_lang"), task.get("target_lang")
    if not src or not tgt:
        # As fairseq's translation task infers them: from the binarized split's name,
        # train.SRC-TGT.SRC.idx.
        import glob
        pairs = {os.path.basename(p).split(".")[1]
                 for p in glob.glob(os.path.join(data_bin, "train.*-*.*.idx"))}
        if len(pairs) != 1:
            sys.exit(f"to_safetensors.py: cannot tell the language pair from {data_bin} "
                     f"(found {sorted(pairs) or 'no train.SRC-TGT.*.idx'}); give the data-bin "
                     "directory the model was trained from")
        src, tgt = pairs.pop().split("-", 1)
    dicts = {}
    for side, lang in (("source", src), ("target", tgt)):
        path = os.path.join(data_bin, f"dict.{lang}.txt")
        if not lang or not os.path.exists(path):
            sys.exit(f"to_safetensors.py: {path} not found; give the data-bin directory the "
                     "model was trained from (fairseq-preprocess's --destdir)")
        dicts[side] = path
    os.makedirs(out_dir + ".tmp")
    names = {}
    for side, path in dicts.items():
        names[side] = os.path.basename(path)
        shutil.copyfile(path, os.path.join(out_dir + ".tmp", names[side]))
    options = {"arch": arch, "model": model, "source_lang": src, "target_lang": tgt,
               "source_dict": names["source"], "target_dict": names["target"]}
    if spm:
        options["sentencepiece"] = os.path.basename(spm)
        shutil.copyfile(spm, os.path.join(out_dir + ".tmp", options["sentencepiece"]))
    with open(os.path.join(out_dir + ".tmp", "fairseq.json"), "w") as f:
        json.dump(options, f, indent=1, sort_keys=True)
    # fairseq 0.12 keeps packed copies of each encoder layer's weights for torch's fused layer
    # (encoder.layers.N.in_proj_weight, fc1_weight, ...): never trained, rebuilt from the named
    # weights when fairseq loads a checkpoint. They are left out; tx reads the named ones.
    packed = ("in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias",
              "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")
    tensors = unique_tensors({k: v for k, v in state["model"].items()
                              if not (k.startswith("encoder.layers.") and k.split(".")[-1] in packed)})
    save(tensors, os.path.join(out_dir + ".tmp", "model.safetensors"), {"format": "pt"})
    os.replace(out_dir + ".tmp", out_dir)
    print(f"to_safetensors.py: wrote {out_dir} ({len(tensors)} tensors, {arch})", file=sys.stderr)


def main():
    args = sys.argv[1:]
    spm = None
    if "--sentencepiece" in args:
        i = args.index("--sentencepiece")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        spm = args[i + 1]
        del args[i:i + 2]
    if len(args) == 1 and spm is None:
        huggingface(args[0])
    elif len(args) == 3:
        fairseq(*args, spm)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
