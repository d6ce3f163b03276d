#!/usr/bin/env python3
"""Re-serialise a Hugging Face model directory's pytorch_model.bin as model.safetensors.

Many OPUS-MT models on the Hub hold their weights only as pytorch_model.bin, a Python pickle,
which tx's programs never read (unpickling runs code). Run this once, with Python and torch
(outside tx), then `tx-translate -m DIR` reads the directory:

    python3 scripts/to_safetensors.py opus-mt-en-de/

The tensors keep their names, shapes and dtypes; tied copies are written once (safetensors
refuses shared memory). Nothing is changed when model.safetensors already exists.
"""
import os
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    src = os.path.join(directory, "pytorch_model.bin")
    dst = os.path.join(directory, "model.safetensors")
    if os.path.exists(dst):
        sys.exit(f"to_safetensors.py: {dst} exists already; nothing to do")
    if not os.path.exists(src):
        sys.exit(f"to_safetensors.py: {src} not found; give a Hugging Face model directory")
    import torch
    from safetensors.torch import save_file

    state = torch.load(src, map_location="cpu")
    seen, tensors = {}, {}
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            continue
        key = (t.data_ptr(), t.shape, t.dtype)
        if key in seen:  # a tied copy: tx finds it under the first name
            continue
        seen[key] = name
        tensors[name] = t.contiguous()
    tmp = dst + ".tmp"
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, dst)
    print(f"to_safetensors.py: wrote {dst} ({len(tensors)} tensors)", file=sys.stderr)


if __name__ == "__main__":
    main()
